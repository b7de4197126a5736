// Micro-benchmark of the write path of one Ready, in one process, with real LevelDB and real framing:
//   leader:   LevelStorage.append of K new entries + hard state, and one append frame per follower (4, as in a
//             5-member cluster), encoded the way PeerLink does;
//   follower: decode and validate that frame (FrameDecoder, parseWireFrame), then LevelStorage.append of its
//             entries + hard state.
// Prints main-thread CPU per Ready for each role (the main thread's run time from /proc/self/task/<pid>/schedstat,
// so LevelDB's threadpool fsyncs are not counted; Linux only).
//
//   node packages/lib/raft/bench-micro/ready.mjs N K [dist-dir]
//
// dist-dir (default: this package's dist) lets another build's dist be compared, A/B; a dist without
// encodeMessageFrame gets frames encoded as PeerLink did before it (encodeFrame of the whole message).
import { readFileSync, rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const N = Number(process.argv[2] ?? 2000);
const K = Number(process.argv[3] ?? 8);
const dist = resolve(process.argv[4] ?? join(fileURLToPath(new URL('.', import.meta.url)), '..', 'dist'));
const load = (path) => import(pathToFileURL(join(dist, path)).href);
const { LevelStorage } = await load('src/storage/leveldb.js');
const framing = await load('src/transport/framing.js');
const { parseWireFrame } = await load('src/transport/wire.js');
const encode =
  framing.encodeMessageFrame ??
  ((message, group) =>
    framing.encodeFrame(group === undefined ? { kind: 'msg', message } : { kind: 'msg', message, group }));
const FOLLOWERS = 4;

/** CPU time of the main thread so far, in ms, at nanosecond precision (the first field of schedstat). */
function mainThreadCpuMs() {
  return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

const dirs = [mkdtempSync(join(tmpdir(), 'raft-ready-')), mkdtempSync(join(tmpdir(), 'raft-ready-'))];
const leader = new LevelStorage(dirs[0]);
const follower = new LevelStorage(dirs[1]);
await leader.load();
await follower.load();
let received = null;
const decoder = new framing.FrameDecoder((value) => {
  received = parseWireFrame(value);
});

let index = 0;
let leaderMs = 0;
let followerMs = 0;
for (let i = 0; i < N; i++) {
  const c0 = mainThreadCpuMs();
  const entries = [];
  for (let j = 0; j < K; j++) {
    index++;
    const data = new Uint8Array(300).fill(index % 251);
    entries.push({ index, term: 1, kind: 'command', data, time: Date.now() });
  }
  const prevIndex = index - K;
  const message = {
    type: 'append',
    from: 'n1',
    to: 'n2',
    term: 1,
    prevIndex,
    prevTerm: prevIndex === 0 ? 0 : 1,
    entries,
    commit: prevIndex,
  };
  const written = leader.append(entries, { term: 1, vote: 'n1', commit: prevIndex });
  const frames = [];
  for (let f = 0; f < FOLLOWERS; f++) frames.push(encode({ ...message, to: `n${f + 2}` }, 'g'));
  await written;
  const c1 = mainThreadCpuMs();
  decoder.push(frames[0]);
  await follower.append(received.message.entries, { term: 1, vote: 'n1', commit: received.message.commit });
  const c2 = mainThreadCpuMs();
  leaderMs += c1 - c0;
  followerMs += c2 - c1;
}
await leader.close();
await follower.close();
for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
const per = (ms) => ((ms / N) * 1000).toFixed(0);
console.log(
  `ready ${N} x ${K} entries: main-thread cpu per Ready: leader ${per(leaderMs)} us, follower ${per(followerMs)} us`,
);
