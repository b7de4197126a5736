/**
 * A watcher process of `bench auction` (forked by the harness, several at once: one process cannot hold 50,000
 * sockets under the 20,000 file-descriptor limit here). It opens its share of WebSocket watchers, each sending
 * `{type: subscribe}` and waiting for its snapshot, spread over the servers it is given, from a source address of
 * its own (127.0.0.N, so the loopback's ephemeral ports are not shared by all processes). Then it counts, per
 * `seq`, how many of its watchers received the push and when the last one did (wall clock in ms, fractional), and
 * tells the harness once all of them have. The same program watches our gateways and the bare ws peer: only the
 * URLs differ.
 *
 * IPC, harness -> watcher: {cmd: connect, urls, count, localAddress, inflight} | {cmd: expect, seq, timeoutMs} |
 * {cmd: close}; watcher -> harness: {ev: ready, connected, failed, ms, errors} | {ev: got, seq, count, first, last}.
 */
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';

interface ConnectCmd {
  cmd: 'connect';
  urls: string[];
  count: number;
  localAddress: string;
  inflight: number;
}
interface ExpectCmd {
  cmd: 'expect';
  seq: number;
  timeoutMs: number;
}
type Cmd = ConnectCmd | ExpectCmd | { cmd: 'close' };

const now = (): number => performance.timeOrigin + performance.now();
const sockets: WebSocket[] = [];
/** seq -> [watchers that received it, arrival of the first one, of the last one]. */
const got = new Map<number, [number, number, number]>();
const waiting = new Map<number, NodeJS.Timeout>();
let connected = 0;

function reply(m: Record<string, unknown>): void {
  process.send?.(m);
}

function settle(seq: number): void {
  const t = waiting.get(seq);
  if (t === undefined) return;
  const g = got.get(seq) ?? [0, 0, 0];
  if (g[0] < connected) return;
  clearTimeout(t);
  waiting.delete(seq);
  reply({ ev: 'got', seq, count: g[0], first: g[1], last: g[2] });
}

function onMessage(data: WebSocket.RawData): void {
  const at = now();
  let m: { type?: unknown; seq?: unknown };
  try {
    m = JSON.parse(String(data)) as { type?: unknown; seq?: unknown };
  } catch {
    return;
  }
  if (m.type !== 'bid_update' || typeof m.seq !== 'number') return;
  const g = got.get(m.seq);
  if (g === undefined) got.set(m.seq, [1, at, at]);
  else {
    g[0]++;
    g[2] = at;
  }
  if (waiting.has(m.seq)) settle(m.seq);
}

/** One watcher: resolves true once its snapshot arrived, false if it failed (counted, not retried). */
function open(url: string, localAddress: string): Promise<string | null> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { localAddress, perMessageDeflate: false, handshakeTimeout: 60_000 });
    let done = false;
    const finish = (error: string | null): void => {
      if (done) return;
      done = true;
      resolve(error);
    };
    ws.on('open', () => ws.send('{"type":"subscribe"}'));
    ws.on('message', (data) => {
      if (!done) {
        const text = String(data);
        if (text.includes('"snapshot"')) {
          sockets.push(ws);
          ws.on('message', onMessage);
          finish(null);
        } else finish(`answer: ${text.slice(0, 80)}`);
      }
    });
    ws.on('error', (e) => finish((e as { code?: string }).code ?? e.message.slice(0, 80)));
    ws.on('close', () => finish('closed'));
  });
}

async function connect(c: ConnectCmd): Promise<void> {
  const t0 = performance.now();
  let next = 0;
  let failed = 0;
  const errors: Record<string, number> = {};
  const lane = async (): Promise<void> => {
    while (next < c.count) {
      const i = next++;
      const error = await open(c.urls[i % c.urls.length]!, c.localAddress);
      if (error === null) connected++;
      else {
        failed++;
        errors[error] = (errors[error] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, c.inflight) }, lane));
  reply({ ev: 'ready', connected, failed, ms: Math.round(performance.now() - t0), errors });
}

process.on('message', (raw) => {
  const c = raw as Cmd;
  if (c.cmd === 'connect') void connect(c);
  else if (c.cmd === 'expect') {
    waiting.set(
      c.seq,
      setTimeout(() => {
        waiting.delete(c.seq);
        const g = got.get(c.seq) ?? [0, 0, 0];
        reply({ ev: 'got', seq: c.seq, count: g[0], first: g[1], last: g[2], timeout: true });
      }, c.timeoutMs),
    );
    settle(c.seq);
  } else if (c.cmd === 'close') {
    for (const ws of sockets) ws.terminate();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
