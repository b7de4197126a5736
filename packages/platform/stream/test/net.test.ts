import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deriveClientToken, MetricsRegistry } from '@raftkit/http';
import t from 'tap';
import { OffsetStore, StreamClient, StreamLog, StreamProducer, StreamServer } from '../src/index.js';
import { freePort } from '@raftkit/testkit';

const TOKEN = 'cluster-token';
const text = (r: Uint8Array) => Buffer.from(r).toString();

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'stream-net-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface Running {
  log: StreamLog;
  server: StreamServer;
  address: string;
  stop(): Promise<void>;
}

async function serve(dir: string, port = 0): Promise<Running> {
  const log = await StreamLog.open({ dir: join(dir, 'segments') });
  const offsets = await OffsetStore.open(join(dir, 'offsets'));
  const server = await StreamServer.listen({ log, offsets, tokens: [TOKEN], host: '127.0.0.1', port });
  return {
    log,
    server,
    address: `127.0.0.1:${server.port}`,
    stop: async () => {
      await server.close();
      await log.close();
    },
  };
}

async function readAll(client: StreamClient, from = 0): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const r = await client.fetch(from + out.length, 1000);
    if (r.records.length === 0) return out;
    out.push(...r.records.map(text));
  }
}

t.test('a producer pipelines records to the server; a consumer reads them from offset 0 in order', async (t) => {
  const s = await serve(tempDir());
  const metrics = new MetricsRegistry();
  const producer = new StreamProducer({
    address: () => s.address,
    token: TOKEN,
    batchRecords: 64,
    metrics,
    metricPrefix: 'p',
  });
  const client = new StreamClient({ address: s.address, token: TOKEN });
  t.teardown(async () => {
    await producer.close();
    client.close();
    await s.stop();
  });
  const accepted = Array.from({ length: 1000 }, (_, i) => producer.send(Buffer.from(`r${i}`)));
  t.ok(accepted.every(Boolean), 'every record accepted into the buffer');
  t.equal(await producer.flush(5_000), true, 'everything acknowledged');
  t.same(producer.stats(), { buffered: 0, sent: 1000, dropped: 0, connected: true });
  t.match(metrics.render(), /p_sent_total 1000/);
  t.same(
    await readAll(client),
    Array.from({ length: 1000 }, (_, i) => `r${i}`),
  );
  const tail = await client.fetch(990, 100);
  t.equal(tail.offset, 990);
  t.equal(tail.records.length, 10);
  t.equal(tail.end, 1000);
});

t.test('a fetch long-polls: it answers when records arrive, or empty when its wait ends', async (t) => {
  const s = await serve(tempDir());
  const client = new StreamClient({ address: s.address, token: TOKEN });
  t.teardown(async () => {
    client.close();
    await s.stop();
  });
  const started = Date.now();
  const empty = await client.fetch(0, 10, { waitMs: 150 });
  t.same(empty.records, []);
  t.ok(Date.now() - started >= 140, 'waited for its wait time');
  const waiting = client.fetch(0, 5, { waitMs: 10_000 });
  await new Promise((r) => setTimeout(r, 50));
  const asked = Date.now();
  await s.log.append([1, 2, 3, 4, 5].map((i) => Buffer.from(String(i))));
  const answer = await waiting;
  t.same(answer.records.map(text), ['1', '2', '3', '4', '5']);
  t.ok(Date.now() - asked < 2_000, 'answered as soon as 5 records were durable');
});

t.test('consumer offsets are committed and read back over TCP; bad requests and tokens are refused', async (t) => {
  const dir = tempDir();
  const s = await serve(dir);
  const client = new StreamClient({ address: s.address, token: TOKEN });
  const intruder = new StreamClient({ address: s.address, token: 'wrong' });
  t.teardown(async () => {
    client.close();
    intruder.close();
    await s.stop();
  });
  t.equal(await client.committed('analytics'), null);
  await client.commit('analytics', 17);
  t.equal(await client.committed('analytics'), 17);
  await t.rejects(client.commit('no spaces allowed', 1), { code: 'bad_request' });
  await t.rejects(intruder.fetch(0, 1), { name: 'RpcError', code: 'unauthorized' });
  const tenant = new StreamClient({ address: s.address, token: deriveClientToken(TOKEN, 'acme') });
  t.teardown(() => tenant.close());
  await t.rejects(
    tenant.fetch(0, 1),
    { name: 'RpcError', code: 'forbidden' },
    "a client key is not the cluster token: the stream is the cluster's own",
  );
  t.same((await OffsetStore.open(join(dir, 'offsets'))).all(), { analytics: 17 }, 'the commit is on disk');
});

t.test(
  'while the stream is down the producer buffers up to its bound, drops the newest, then delivers the rest',
  async (t) => {
    const dir = tempDir();
    const port = await freePort();
    const producer = new StreamProducer({
      address: () => `127.0.0.1:${port}`,
      token: TOKEN,
      bufferRecords: 100,
      minBackoffMs: 20,
      maxBackoffMs: 100,
    });
    let s: Running | undefined;
    t.teardown(async () => {
      await producer.close();
      await s?.stop();
    });
    const accepted = Array.from({ length: 150 }, (_, i) => producer.send(Buffer.from(`c${i}`)));
    t.equal(accepted.filter(Boolean).length, 100);
    t.same(accepted.slice(100), Array(50).fill(false), 'the 50 newest were dropped');
    t.same(producer.stats(), { buffered: 100, sent: 0, dropped: 50, connected: false });
    await new Promise((r) => setTimeout(r, 200));
    s = await serve(dir, port);
    t.equal(await producer.flush(5_000), true);
    t.same(producer.stats(), { buffered: 0, sent: 100, dropped: 50, connected: true });
    const client = new StreamClient({ address: s.address, token: TOKEN });
    t.same(
      await readAll(client),
      Array.from({ length: 100 }, (_, i) => `c${i}`),
      'the oldest 100, in order',
    );
    client.close();
  },
);

t.test(
  'weighted records: the bound and the counts are in units; room() and dropFull() cut a block to fit',
  async (t) => {
    const dir = tempDir();
    const port = await freePort();
    const sent: number[] = [];
    const dropped: Array<[number, string]> = [];
    const meter = {
      sent: (n: number) => sent.push(n),
      dropped: (n: number, reason: string) => dropped.push([n, reason]),
    };
    const producer = new StreamProducer({
      address: () => `127.0.0.1:${port}`,
      token: TOKEN,
      bufferRecords: 10,
      minBackoffMs: 20,
      maxBackoffMs: 100,
      meter,
    });
    let s: Running | undefined;
    t.teardown(async () => {
      await producer.close();
      await s?.stop();
    });
    t.equal(producer.send(Buffer.from('b0'), 4), true);
    t.equal(producer.send(Buffer.from('b1'), 4), true);
    t.equal(producer.send(Buffer.from('b2'), 4), false, 'a record that would pass the bound is dropped whole');
    t.equal(producer.room(), 2);
    producer.dropFull(3);
    t.equal(producer.send(Buffer.from('b3'), 2), true, 'a record cut to the room left fits');
    t.same(producer.stats(), { buffered: 10, sent: 0, dropped: 7, connected: false });
    t.same(dropped, [
      [4, 'buffer_full'],
      [3, 'buffer_full'],
    ]);
    s = await serve(dir, port);
    t.equal(await producer.flush(5_000), true);
    t.same(producer.stats(), { buffered: 0, sent: 10, dropped: 7, connected: true });
    t.equal(
      sent.reduce((a, b) => a + b, 0),
      10,
      'the meter saw every unit sent',
    );
    const client = new StreamClient({ address: s.address, token: TOKEN });
    t.same(await readAll(client), ['b0', 'b1', 'b3'], 'three records on the stream');
    client.close();
  },
);

t.test(
  'a producer survives the server going away mid-stream: every record arrives at least once, in order of first arrival',
  async (t) => {
    const dir = tempDir();
    let s = await serve(dir);
    const port = s.server.port;
    const producer = new StreamProducer({
      address: () => `127.0.0.1:${port}`,
      token: TOKEN,
      bufferRecords: 100_000,
      batchRecords: 50,
      minBackoffMs: 20,
      maxBackoffMs: 100,
    });
    t.teardown(async () => {
      await producer.close();
      await s.stop();
    });
    let sent = 0;
    const pump = setInterval(() => {
      for (let i = 0; i < 200; i++) producer.send(Buffer.from(`m${sent++}`));
    }, 5);
    await new Promise((r) => setTimeout(r, 150));
    await s.stop();
    await new Promise((r) => setTimeout(r, 150));
    s = await serve(dir, port);
    await new Promise((r) => setTimeout(r, 150));
    clearInterval(pump);
    t.equal(await producer.flush(10_000), true, 'the buffer drained after the restart');
    t.equal(producer.stats().dropped, 0);
    const client = new StreamClient({ address: s.address, token: TOKEN });
    const seen = await readAll(client);
    client.close();
    const firsts = [...new Set(seen)];
    t.equal(firsts.length, sent, `all ${sent} records are in the stream (${seen.length - firsts.length} duplicates)`);
    t.same(
      firsts,
      Array.from({ length: sent }, (_, i) => `m${i}`),
      'first occurrences are in send order',
    );
  },
);

t.test('after SIGKILL mid-append, every acknowledged record is on disk and the log reopens clean', async (t) => {
  const dir = tempDir();
  const child = spawn(process.execPath, [fileURLToPath(new URL('./helpers/appender.js', import.meta.url)), dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let lastAcked = -1;
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    const lines = out.split('\n');
    out = lines.pop()!;
    for (const line of lines) lastAcked = Math.max(lastAcked, Number(line));
  });
  // Kill it while it is appending: once it has acknowledged a few batches (its start-up time varies with load).
  const deadline = Date.now() + 30_000;
  while (lastAcked < 500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  t.ok(lastAcked > 100, `child acknowledged up to offset ${lastAcked}`);
  const log = await StreamLog.open({ dir, segmentBytes: 64 * 1024 });
  t.ok(log.endOffset > lastAcked, `end ${log.endOffset} covers every acknowledged record`);
  let next = 0;
  let intact = true;
  while (next < log.endOffset) {
    const { records } = await log.read(next, 5_000);
    for (const r of records) intact &&= text(r) === String(next++);
  }
  t.ok(intact, 'record i holds i, for every record');
  t.equal(await log.append([Buffer.from('after')]), next, 'appends continue where the log ends');
  await log.close();
});

t.test(
  'before its hello a connection cannot make the server buffer a large frame; after it, large frames pass',
  async (t) => {
    const { connect } = await import('node:net');
    const { pack, unpack } = await import('msgpackr');
    const s = await serve(tempDir());
    t.teardown(() => s.stop());
    const [host, port] = s.address.split(':') as [string, string];
    const frame = (message: unknown): Buffer => {
      const body = pack(message);
      const head = Buffer.alloc(4);
      head.writeUInt32BE(body.length);
      return Buffer.concat([head, body]);
    };
    // A stranger announces a 60 MB frame and starts sending it: refused at once, no hello needed for the answer.
    const stranger = connect(Number(port), host);
    stranger.on('error', () => {});
    const closed = new Promise<string>((resolve) => {
      let got = Buffer.alloc(0);
      stranger.on('data', (chunk: Buffer) => (got = Buffer.concat([got, chunk])));
      stranger.on('close', () =>
        resolve(
          got.length > 4
            ? String((unpack(got.subarray(4, 4 + got.readUInt32BE(0))) as { error?: { code?: string } }).error?.code)
            : 'nothing',
        ),
      );
    });
    const head = Buffer.alloc(4);
    head.writeUInt32BE(60_000_000);
    stranger.write(head);
    stranger.write(Buffer.alloc(1 << 20, 1));
    const outcome = await Promise.race([
      closed,
      new Promise<string>((r) => setTimeout(() => r('still open after 10 s'), 10_000)),
    ]);
    t.equal(outcome, 'frame_too_large', 'the server answered frame_too_large and closed the connection');
    stranger.destroy();

    // A client that said hello may send a frame far above the pre-hello limit.
    const client = connect(Number(port), host);
    t.teardown(() => client.destroy());
    const answers: unknown[] = [];
    let buffered = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 4 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
        answers.push(unpack(buffered.subarray(4, 4 + buffered.readUInt32BE(0))));
        buffered = buffered.subarray(4 + buffered.readUInt32BE(0));
      }
    });
    client.write(
      Buffer.concat([
        frame({ hello: TOKEN }),
        frame([[2, { t: 'produce', records: Array.from({ length: 64 }, () => Buffer.alloc(1024, 7)) }]]),
      ]),
    );
    const deadline = Date.now() + 10_000;
    while (answers.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    t.match(
      answers,
      [{ welcome: { kind: 'cluster' } }, [[2, 0, { count: 64 }]]],
      'hello, then a 64 KiB produce in the same write, are both served',
    );
  },
);
