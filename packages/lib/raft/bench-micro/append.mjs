// Micro-benchmark of LevelStorage.append: N sequential appends of K command entries (300 bytes each) plus a hard
// state, as a follower's Ready does. Prints wall time, main-thread CPU and whole-process CPU per append.
// Main-thread CPU comes from /proc/self/task/<pid>/schedstat (the main thread's run time only, excluding
// LevelDB's threadpool work such as fsync), so it is Linux-only.
//
//   node packages/lib/raft/bench-micro/append.mjs N K [dist-dir]
//
// dist-dir (default: this package's dist) lets a copy of another build's dist be compared, A/B.
import { readFileSync, rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const N = Number(process.argv[2] ?? 2000);
const K = Number(process.argv[3] ?? 1);
const dist = resolve(process.argv[4] ?? join(fileURLToPath(new URL('.', import.meta.url)), '..', 'dist'));
const { LevelStorage } = await import(pathToFileURL(join(dist, 'src/storage/leveldb.js')).href);

/** CPU time of the main thread so far, in ms, at nanosecond precision (the first field of schedstat). */
function mainThreadCpuMs() {
  return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

const dir = mkdtempSync(join(tmpdir(), 'raft-append-'));
const storage = new LevelStorage(dir);
await storage.load();
const data = new Uint8Array(300);
let index = 0;
const c0 = mainThreadCpuMs();
const t0 = performance.now();
const p0 = process.cpuUsage();
for (let i = 0; i < N; i++) {
  const entries = [];
  for (let j = 0; j < K; j++) {
    index++;
    entries.push({ index, term: 1, kind: 'command', data, time: Date.now() });
  }
  await storage.append(entries, { term: 1, vote: 'n1', commit: index - 1 });
}
const c1 = mainThreadCpuMs();
const t1 = performance.now();
const p1 = process.cpuUsage(p0);
await storage.close();
rmSync(dir, { recursive: true, force: true });
const per = (x) => ((x / N) * 1000).toFixed(0);
console.log(
  `append ${N} x ${K}: wall ${per(t1 - t0)} us, main-thread cpu ${per(c1 - c0)} us, process cpu ${((p1.user + p1.system) / N).toFixed(0)} us (each)`,
);
