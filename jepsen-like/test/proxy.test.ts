import { connect, createServer, type Server, type Socket } from 'node:net';
import { Packr } from 'msgpackr';
import t from 'tap';
import { LinkProxy } from '../src/index.js';

const packr = new Packr({ useRecords: false, mapsAsObjects: true });
const frame = (value: unknown): Buffer => {
  const payload = packr.pack(value);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(payload.length);
  return Buffer.concat([header, payload]);
};

/** A stand-in for a member's Raft port: decodes the frames it receives. */
async function sink(): Promise<{
  server: Server;
  port: number;
  frames: { value: Record<string, unknown>; at: number }[];
}> {
  const frames: { value: Record<string, unknown>; at: number }[] = [];
  const server = createServer((socket) => {
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 4 && buffer.length >= 4 + buffer.readUInt32BE(0)) {
        const length = buffer.readUInt32BE(0);
        frames.push({ value: packr.unpack(buffer.subarray(4, 4 + length)) as Record<string, unknown>, at: Date.now() });
        buffer = buffer.subarray(4 + length);
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, port: (server.address() as { port: number }).port, frames };
}

async function setup(): Promise<{
  proxy: LinkProxy;
  target: Awaited<ReturnType<typeof sink>>;
  sender: Socket;
  close: () => Promise<void>;
}> {
  const target = await sink();
  const proxy = new LinkProxy({
    targetId: 'n2',
    listen: { host: '127.0.0.1', port: 0 },
    target: { host: '127.0.0.1', port: target.port },
    seed: 1,
  });
  const port = await proxy.start();
  const sender = connect(port, '127.0.0.1');
  await new Promise<void>((r) => sender.once('connect', () => r()));
  sender.write(frame({ kind: 'hello', version: 1, from: 'n1', to: 'n2' }));
  return {
    proxy,
    target,
    sender,
    close: async () => {
      sender.destroy();
      await proxy.close();
      await new Promise<void>((r) => target.server.close(() => r()));
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const msgs = (frames: { value: Record<string, unknown> }[]): number[] =>
  frames.filter((f) => f.value.kind === 'msg').map((f) => (f.value.message as { n: number }).n);

t.test('frames pass through in order; the hello names the link', async (t) => {
  const { target, sender, close } = await setup();
  for (let n = 0; n < 50; n++) sender.write(frame({ kind: 'msg', message: { n } }));
  await sleep(200);
  t.same(target.frames[0]!.value, { kind: 'hello', version: 1, from: 'n1', to: 'n2' });
  t.same(
    msgs(target.frames),
    Array.from({ length: 50 }, (_, n) => n),
  );
  await close();
});

t.test('a cut link holds everything; healing delivers it, in order', async (t) => {
  const { proxy, target, sender, close } = await setup();
  await sleep(50);
  proxy.setCut(['n1']);
  for (let n = 0; n < 10; n++) sender.write(frame({ kind: 'msg', message: { n } }));
  await sleep(200);
  t.same(msgs(target.frames), [], 'nothing crosses a cut link');
  proxy.setCut(['n3']);
  await sleep(200);
  t.same(
    msgs(target.frames),
    Array.from({ length: 10 }, (_, n) => n),
    'delivered late after the heal, as TCP would',
  );
  await close();
});

t.test('loss drops messages but never the hello or snapshot chunks; latency delays', async (t) => {
  const { proxy, target, sender, close } = await setup();
  await sleep(50);
  proxy.setRule('n1', { delayMs: 0, jitterMs: 0, loss: 1, reorder: 0, reorderDelayMs: 0 });
  for (let n = 0; n < 10; n++) sender.write(frame({ kind: 'msg', message: { n } }));
  sender.write(frame({ kind: 'snapChunk', stream: 1, offset: 0 }));
  await sleep(200);
  t.same(msgs(target.frames), [], 'every message lost');
  t.equal(target.frames.filter((f) => f.value.kind === 'snapChunk').length, 1, 'the chunk arrives');
  t.equal(proxy.stats.framesDropped, 10);
  proxy.setRule('n1', { delayMs: 150, jitterMs: 0, loss: 0, reorder: 0, reorderDelayMs: 0 });
  const sent = Date.now();
  sender.write(frame({ kind: 'msg', message: { n: 99 } }));
  await sleep(400);
  const arrived = target.frames.find((f) => f.value.kind === 'msg');
  t.ok(arrived !== undefined && arrived.at - sent >= 140, 'delayed by about 150 ms');
  await close();
});

t.test('reordering: every message arrives, some overtaken', async (t) => {
  const { proxy, target, sender, close } = await setup();
  await sleep(50);
  proxy.setRule('*', { delayMs: 0, jitterMs: 0, loss: 0, reorder: 0.5, reorderDelayMs: 30 });
  for (let n = 0; n < 40; n++) sender.write(frame({ kind: 'msg', message: { n } }));
  await sleep(300);
  const got = msgs(target.frames);
  t.same(
    [...got].sort((a, b) => a - b),
    Array.from({ length: 40 }, (_, n) => n),
    'nothing lost',
  );
  t.notSame(
    got,
    Array.from({ length: 40 }, (_, n) => n),
    'not in the order sent',
  );
  await close();
});
