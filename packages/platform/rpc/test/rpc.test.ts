import { connect, type Socket } from 'node:net';
import { pack, unpack } from 'msgpackr';
import t from 'tap';
import { deriveClientToken, type Principal } from '@raftkit/http';
import { HttpError, MetricsRegistry } from '@raftkit/http';
import {
  RpcClient,
  RpcConnection,
  RpcError,
  serveRpc,
  type RpcHandler,
  type RpcServer,
  type RpcServerOptions,
} from '../src/index.js';

const TOKEN = 'cluster-token-for-wire-tests';
/** What the helpers need of a test: a place to register cleanup. */
interface Tap {
  teardown(fn: () => unknown): void;
}

type Handler = RpcHandler<unknown, unknown>;

async function server(
  t: Tap,
  handler: Handler,
  maxFrameBytes?: number,
  more: Partial<RpcServerOptions<unknown, unknown>> = {},
): Promise<RpcServer> {
  const s = await serveRpc({
    address: '127.0.0.1:0',
    tokens: [TOKEN],
    handler,
    ...(maxFrameBytes !== undefined ? { maxFrameBytes } : {}),
    ...more,
  });
  t.teardown(() => s.close());
  return s;
}

function client(
  t: Tap,
  port: number,
  options: { token?: string; timeoutMs?: number; maxInFlight?: number } = {},
): RpcClient {
  const c = new RpcClient({
    address: `127.0.0.1:${port}`,
    token: options.token ?? TOKEN,
    timeoutMs: options.timeoutMs ?? 2_000,
    ...(options.maxInFlight !== undefined ? { maxInFlight: options.maxInFlight } : {}),
  });
  t.teardown(() => c.close());
  return c;
}

function frame(value: unknown): Buffer {
  const body = pack(value);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length);
  return Buffer.concat([header, body]);
}

/** A hand-driven connection: writes raw bytes, collects decoded frames until the server closes it. */
function raw(
  t: Tap,
  port: number,
): { socket: Socket; frames: unknown[]; closed: Promise<void>; next(): Promise<unknown> } {
  const socket = connect({ host: '127.0.0.1', port });
  t.teardown(() => socket.destroy());
  const frames: unknown[] = [];
  let buffer = Buffer.alloc(0);
  let waiter: (() => void) | null = null;
  socket.on('data', (d: Buffer) => {
    buffer = Buffer.concat([buffer, d]);
    while (buffer.length >= 4 && buffer.length >= 4 + buffer.readUInt32BE(0)) {
      const length = buffer.readUInt32BE(0);
      frames.push(unpack(buffer.subarray(4, 4 + length)));
      buffer = buffer.subarray(4 + length);
    }
    waiter?.();
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let read = 0;
  const next = async (): Promise<unknown> => {
    while (frames.length <= read) await new Promise<void>((resolve) => (waiter = resolve));
    return frames[read++];
  };
  return { socket, frames, closed, next };
}

const echo: Handler = (request) => request;

t.test('pipelined calls: every reply reaches its own call', async (t) => {
  const s = await server(t, (request) => {
    const n = request as number;
    // Later calls answer first: replies must be matched by id, not by order.
    return new Promise((resolve) => setTimeout(() => resolve(n * 2), 30 - (n % 30)));
  });
  const c = client(t, s.port);
  const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => c.call(i)));
  t.same(
    answers,
    Array.from({ length: 300 }, (_, i) => i * 2),
  );
});

t.test(
  'a call with a decode settles with the decoded reply; a decode that throws rejects that call only',
  async (t) => {
    const s = await server(t, (request) => {
      if (request === 'refuse') throw new RpcError('bad_request', 'refused by the handler');
      return request;
    });
    const c = client(t, s.port);
    let decoded = 0;
    const double = { decode: (reply: unknown): number => (decoded++, (reply as number) * 2) };
    const picky = {
      decode: (reply: unknown): string => {
        if (typeof reply !== 'string') throw new TypeError(`not a string: ${String(reply)}`);
        return reply;
      },
    };
    t.same(await Promise.all([c.call(1, double), c.call(2, double), c.call('x', picky)]), [2, 4, 'x']);
    await t.rejects(c.call(7, picky), { name: 'TypeError', message: 'not a string: 7' });
    // A refused call is the server's error, whatever the decode: the decode never sees an error body.
    await t.rejects(c.call('refuse', double), { code: 'bad_request' });
    t.equal(decoded, 2, 'decode ran once per answered call, never for the refusal');
    t.equal(await c.call(5, { decode: (r: unknown) => `got ${String(r)}` }), 'got 5', 'the connection lives on');
  },
);

t.test('calls made in one turn of the event loop leave in one frame; their replies come back in one', async (t) => {
  let frames = 0;
  const s = await server(t, echo);
  s.server.on('connection', (socket: Socket) => socket.on('data', () => frames++));
  const c = client(t, s.port);
  await c.call('warm-up');
  frames = 0;
  const answers = await Promise.all(['a', 'b', 'c', 'd'].map((x) => c.call(x)));
  t.same(answers, ['a', 'b', 'c', 'd']);
  t.equal(frames, 1, 'one data event carried the four calls');
});

t.test('a batch frame by hand: one reply frame with every id', async (t) => {
  const s = await server(t, echo);
  const r = raw(t, s.port);
  r.socket.write(frame({ hello: TOKEN }));
  r.socket.write(
    frame([
      [7, 'x'],
      [8, { y: 1 }],
      [9, [1, 2]],
    ]),
  );
  t.same(await r.next(), { welcome: { kind: 'cluster', name: 'cluster' } });
  t.same(await r.next(), [
    [7, 0, 'x'],
    [8, 0, { y: 1 }],
    [9, 0, [1, 2]],
  ]);
});

t.test('auth: the cluster token and client tokens derived from it pass; the handler sees who called', async (t) => {
  const seen: Principal[] = [];
  const s = await server(t, (_request, { principal }) => {
    seen.push(principal);
    return principal.kind;
  });
  t.equal(await client(t, s.port).call(1), 'cluster');
  t.equal(await client(t, s.port, { token: deriveClientToken(TOKEN, 'check.acme') }).call(1), 'client');
  t.equal(seen[1]!.name, 'check.acme');
});

t.test('auth: a wrong token is refused with an error frame and the connection closed', async (t) => {
  const s = await server(t, echo);
  const error = await client(t, s.port, { token: 'nope' })
    .call(1)
    .catch((e: unknown) => e);
  t.ok(error instanceof RpcError);
  t.equal((error as RpcError).code, 'unauthorized');
  const forged = await client(t, s.port, { token: `client.acme.${'A'.repeat(43)}` })
    .call(1)
    .catch((e: unknown) => e);
  t.equal((forged as RpcError).code, 'unauthorized', 'a client token with a forged mac');
});

t.test('auth: calls before hello are refused and run no handler', async (t) => {
  let calls = 0;
  const s = await server(t, () => ++calls);
  const r = raw(t, s.port);
  r.socket.write(frame([[1, 'x']]));
  t.same(await r.next(), {
    error: { code: 'unauthorized', message: 'the first frame must be { hello: token }', status: 401 },
  });
  await r.closed;
  t.equal(calls, 0);
});

t.test('malformed input: error frame, connection closed, process unharmed, others still served', async (t) => {
  let calls = 0;
  const s = await server(t, (request) => (calls++, request), 1024);
  const cases: Array<[string, Buffer[], string]> = [
    ['bad msgpack', [frame({ hello: TOKEN }), Buffer.from([0, 0, 0, 2, 0xc1, 0xc1])], 'malformed'],
    ['frame over the limit', [frame({ hello: TOKEN }), Buffer.from([0, 0, 0x10, 0])], 'frame_too_large'],
    ['calls not an array', [frame({ hello: TOKEN }), frame({ not: 'calls' })], 'malformed'],
    ['a call without an id', [frame({ hello: TOKEN }), frame([[1, 'ok'], ['x']])], 'malformed'],
    ['an empty frame', [frame({ hello: TOKEN }), Buffer.from([0, 0, 0, 0])], 'malformed'],
    ['garbage instead of hello', [Buffer.from('GET / HTTP/1.1\r\n\r\n')], 'frame_too_large'],
  ];
  for (const [name, chunks, code] of cases) {
    const r = raw(t, s.port);
    for (const c of chunks) r.socket.write(c);
    await r.closed;
    const last = r.frames[r.frames.length - 1] as { error?: { code: string } };
    t.equal(last.error?.code, code, name);
  }
  t.equal(calls, 0, 'no call of a malformed frame ran, not even the valid one beside a bad one');
  t.equal(await client(t, s.port).call('still here'), 'still here');
});

t.test('at most 1,024 calls a frame: a frame with more runs none of them and ends the connection', async (t) => {
  let calls = 0;
  const s = await server(t, (request) => (calls++, request));
  const r = raw(t, s.port);
  r.socket.write(frame({ hello: TOKEN }));
  t.ok((await r.next()) !== undefined, 'welcome');
  r.socket.write(frame(Array.from({ length: 1_024 }, (_, i) => [i + 1, i])));
  const answers = (await r.next()) as unknown[];
  t.equal(answers.length, 1_024, 'a frame of exactly 1,024 calls is served');
  r.socket.write(frame(Array.from({ length: 40_000 }, (_, i) => [i + 1, i])));
  await r.closed;
  const last = r.frames[r.frames.length - 1] as { error?: { code: string; message: string } };
  t.equal(last.error?.code, 'too_many_calls', 'a frame of 40,000 calls is refused');
  t.equal(calls, 1_024, 'none of its calls ran');
});

t.test('before the hello is verified, a frame over 4 KiB is refused unread', async (t) => {
  const s = await server(t, echo);
  const r = raw(t, s.port);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(1_000_000);
  r.socket.write(header);
  await r.closed;
  const last = r.frames[r.frames.length - 1] as { error?: { code: string } };
  t.equal(last.error?.code, 'frame_too_large', 'a 1 MB frame announced before hello ends the connection at once');
  const authed = raw(t, s.port);
  authed.socket.write(frame({ hello: TOKEN }));
  await authed.next();
  authed.socket.write(frame([[1, 'x'.repeat(100_000)]]));
  t.same(await authed.next(), [[1, 0, 'x'.repeat(100_000)]], 'after the hello, large frames are read as before');
});

t.test('a frame split across many writes is reassembled', async (t) => {
  const s = await server(t, echo);
  const r = raw(t, s.port);
  const bytes = Buffer.concat([frame({ hello: TOKEN }), frame([[1, 'z'.repeat(5000)]])]);
  for (let i = 0; i < bytes.length; i += 7) {
    r.socket.write(bytes.subarray(i, i + 7));
    if (i % 700 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await r.next();
  t.same(await r.next(), [[1, 0, 'z'.repeat(5000)]]);
});

t.test('handler errors answer that call only; the connection lives on', async (t) => {
  const s = await server(t, (request) => {
    if (request === 'bad') throw new RpcError('bad_request', 'no thanks');
    if (request === 'bug') throw new Error('oops');
    if (request === 'async-bad') return Promise.reject(new RpcError('bad_request', 'later'));
    return request;
  });
  const c = client(t, s.port);
  const [bad, bug, asyncBad, good] = await Promise.allSettled([
    c.call('bad'),
    c.call('bug'),
    c.call('async-bad'),
    c.call('good'),
  ]);
  t.equal(((bad as PromiseRejectedResult).reason as RpcError).code, 'bad_request');
  t.same(((bug as PromiseRejectedResult).reason as RpcError).message, 'internal error', 'internals are not leaked');
  t.equal(((asyncBad as PromiseRejectedResult).reason as RpcError).message, 'later');
  t.equal((good as PromiseFulfilledResult<unknown>).value, 'good');
});

t.test('a call never waits past its timeout', async (t) => {
  const s = await server(t, (request) => (request === 'hang' ? new Promise(() => {}) : request));
  const c = client(t, s.port, { timeoutMs: 5_000 });
  const started = Date.now();
  const error = await c.call('hang', { timeoutMs: 80 }).catch((e: unknown) => e);
  const elapsed = Date.now() - started;
  t.equal((error as RpcError).code, 'timeout');
  t.ok(elapsed >= 75 && elapsed < 500, `rejected after ${elapsed} ms`);
  t.equal(await c.call('after'), 'after', 'the connection is still usable');
});

t.test('calls with different timeouts on one connection each fail at their own deadline', async (t) => {
  const s = await server(t, (request) => (request === 'hang' ? new Promise(() => {}) : request));
  const c = client(t, s.port, { timeoutMs: 5_000 });
  const started = Date.now();
  const settledAt = (p: Promise<unknown>): Promise<{ code: string; after: number }> =>
    p.then(
      () => ({ code: 'answered', after: Date.now() - started }),
      (e: unknown) => ({ code: (e as RpcError).code, after: Date.now() - started }),
    );
  // The long call arms the connection's deadline timer first; the shorter calls made after it must not wait for it.
  const long = settledAt(c.call('hang', { timeoutMs: 600 }));
  const short = settledAt(c.call('hang', { timeoutMs: 60 }));
  const middle = settledAt(c.call('hang', { timeoutMs: 250 }));
  const answered = await c.call('quick', { timeoutMs: 1_000 });
  t.equal(answered, 'quick', 'a call answered in time is not failed by the sweep');
  const [l, sh, m] = await Promise.all([long, short, middle]);
  for (const r of [l, sh, m]) t.equal(r.code, 'timeout');
  t.ok(sh.after >= 55 && sh.after < 250, `the 60 ms call failed after ${sh.after} ms`);
  t.ok(m.after >= 245 && m.after < 600, `the 250 ms call failed after ${m.after} ms`);
  t.ok(l.after >= 595 && l.after < 1_500, `the 600 ms call failed after ${l.after} ms`);
  t.equal(await c.call('after'), 'after', 'the connection is still usable');
});

t.test('in-flight limit: calls beyond it fail at once with overloaded', async (t) => {
  const s = await server(t, () => new Promise(() => {}));
  const c = client(t, s.port, { maxInFlight: 3, timeoutMs: 200 });
  const calls = [1, 2, 3].map((x) => c.call(x).catch((e: unknown) => e));
  const fourth = await c.call(4).catch((e: unknown) => e);
  t.equal((fourth as RpcError).code, 'overloaded');
  for (const e of await Promise.all(calls)) t.equal((e as RpcError).code, 'timeout');
});

t.test('nobody listening: unavailable at once; close() rejects pending calls', async (t) => {
  const s = await server(t, () => new Promise(() => {}));
  const port = s.port;
  const c = client(t, port);
  const pending = c.call('x').catch((e: unknown) => e);
  await new Promise((resolve) => setTimeout(resolve, 50));
  c.close();
  t.equal(((await pending) as RpcError).code, 'closed');
  t.equal(((await c.call('y').catch((e: unknown) => e)) as RpcError).code, 'closed');
  await s.close();
  const d = client(t, port);
  const started = Date.now();
  t.equal(((await d.call('z').catch((e: unknown) => e)) as RpcError).code, 'unavailable');
  t.ok(Date.now() - started < 1_000);
});

t.test('reconnects after the server comes back', async (t) => {
  const first = await serveRpc({ address: '127.0.0.1:0', tokens: [TOKEN], handler: () => 'first' });
  const port = first.port;
  const c = client(t, port);
  t.equal(await c.call(1), 'first');
  await first.close();
  t.equal(((await c.call(2).catch((e: unknown) => e)) as RpcError).code, 'unavailable');
  const again = await serveRpc({ address: `127.0.0.1:${port}`, tokens: [TOKEN], handler: () => 'second' });
  t.teardown(() => again.close());
  await new Promise((resolve) => setTimeout(resolve, 150)); // past the redial back-off
  t.equal(await c.call(3), 'second');
});

t.test(
  'one error model: a handler throwing an HttpError answers its code and HTTP status; toHttpError turns it back',
  async (t) => {
    const s = await server(t, (request) => {
      if (request === 'gone') throw new HttpError(404, 'unknown_service', 'no such service');
      if (request === 'busy') return Promise.reject(new HttpError(429, 'rate_limited', 'slow down'));
      return request;
    });
    const c = client(t, s.port);
    const gone = (await c.call('gone').catch((e: unknown) => e)) as RpcError;
    t.same([gone.code, gone.status, gone.message], ['unknown_service', 404, 'no such service']);
    const busy = (await c.call('busy').catch((e: unknown) => e)) as RpcError;
    t.same([busy.code, busy.status], ['rate_limited', 429]);
    const http = busy.toHttpError();
    t.ok(http instanceof HttpError);
    t.same([http.status, http.code], [429, 'rate_limited']);
    t.equal(new RpcError('timeout', 'x').status, 504, "the transport's own codes have their statuses");
    t.equal(new RpcError('overloaded', 'x').status, 503);
  },
);

t.test('typed handlers: parse checks every request before the handler sees it', async (t) => {
  const seen: number[] = [];
  const s = await serveRpc<{ n: number }, number>({
    address: '127.0.0.1:0',
    tokens: [TOKEN],
    parse: (raw) => {
      const n = (raw as { n?: unknown } | null)?.n;
      if (typeof n !== 'number') throw new RpcError('bad_request', 'n must be a number');
      return { n };
    },
    handler: ({ n }) => (seen.push(n), n + 1),
  });
  t.teardown(() => s.close());
  const c = client(t, s.port);
  t.equal(await c.call({ n: 41 }), 42);
  const bad = (await c.call({ n: 'x' }).catch((e: unknown) => e)) as RpcError;
  t.same([bad.code, bad.message], ['bad_request', 'n must be a number']);
  t.same(seen, [41], 'the bad request never reached the handler');
});

t.test("admits 'cluster': a client key's hello is refused with forbidden", async (t) => {
  const s = await server(t, echo, undefined, { admits: 'cluster' });
  const refused = (await client(t, s.port, { token: deriveClientToken(TOKEN, 'acme') })
    .call(1)
    .catch((e: unknown) => e)) as RpcError;
  t.equal(refused.code, 'forbidden');
  t.equal(await client(t, s.port).call(1), 1, 'the cluster token passes');
});

t.test(
  'the server bounds calls in flight per connection: more are answered overloaded, the rest still answer',
  async (t) => {
    const release: Array<() => void> = [];
    const s = await server(
      t,
      (request) => (request === 'wait' ? new Promise((resolve) => release.push(() => resolve('done'))) : request),
      undefined,
      { maxInFlight: 2 },
    );
    const c = client(t, s.port);
    const waiting = [c.call('wait'), c.call('wait')];
    await new Promise((resolve) => setTimeout(resolve, 50));
    const third = (await c.call('wait').catch((e: unknown) => e)) as RpcError;
    t.equal(third.code, 'overloaded');
    for (const r of release) r();
    t.same(await Promise.all(waiting), ['done', 'done'], 'the calls within the limit are answered');
    t.equal(await c.call('after'), 'after', 'once they are, the connection takes calls again');
  },
);

t.test(
  'an aborted call settles at once with cancelled; the handler sees its connection close through its signal',
  async (t) => {
    let handlerSignal: AbortSignal | undefined;
    const s = await server(t, (request, { signal }) => {
      handlerSignal = signal;
      return request === 'hang' ? new Promise(() => {}) : request;
    });
    const c = new RpcConnection({ address: `127.0.0.1:${s.port}`, token: TOKEN, timeoutMs: 5_000 });
    const controller = new AbortController();
    const started = Date.now();
    const pending = c.call('hang', { signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort(), 30);
    t.equal(((await pending) as RpcError).code, 'cancelled');
    t.ok(Date.now() - started < 1_000);
    t.equal(await c.call('next'), 'next', 'the connection lives on');
    t.equal(handlerSignal?.aborted, false);
    c.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.equal(handlerSignal?.aborted, true, 'closing the connection aborts what its handlers wait on');
  },
);

t.test('RpcConnection.open waits for the welcome and rejects a refused hello; onClose reports why', async (t) => {
  const s = await server(t, echo);
  const good = await RpcConnection.open({ address: `127.0.0.1:${s.port}`, token: TOKEN });
  t.same(await good.welcomed, { kind: 'cluster', name: 'cluster' });
  const reasons: string[] = [];
  good.onClose((reason) => reasons.push(reason.code));
  good.close();
  t.same(reasons, ['closed']);
  const refused = (await RpcConnection.open({ address: `127.0.0.1:${s.port}`, token: 'wrong' }).catch(
    (e: unknown) => e,
  )) as RpcError;
  t.equal(refused.code, 'unauthorized');
});

t.test('metrics: connections, calls by outcome, refusals', async (t) => {
  const metrics = new MetricsRegistry();
  const s = await server(
    t,
    (request) => {
      if (request === 'bad') throw new RpcError('bad_request', 'no');
      return request;
    },
    undefined,
    { metrics, name: 'demo' },
  );
  const c = client(t, s.port);
  await Promise.all([c.call(1), c.call(2), c.call(3)]);
  await c.call('bad').catch(() => undefined);
  await client(t, s.port, { token: 'wrong' })
    .call(1)
    .catch(() => undefined);
  const text = metrics.render();
  t.match(text, /rpc_calls_total\{[^}]*outcome="ok"[^}]*\} 3/);
  t.match(text, /rpc_calls_total\{[^}]*outcome="bad_request"[^}]*\} 1/);
  t.match(text, /rpc_connections_refused_total\{[^}]*reason="unauthorized"[^}]*\} 1/);
  t.match(text, /rpc_connections\{service="demo"\} [12]/);
});

t.test(
  'calls that together exceed the frame limit leave in several frames; only a call too large alone fails',
  async (t) => {
    const frameLimit = 4096;
    const s = await server(t, (request) => (request as string).length, frameLimit);
    const c = new RpcClient({
      address: `127.0.0.1:${s.port}`,
      token: TOKEN,
      timeoutMs: 2_000,
      maxFrameBytes: frameLimit,
    });
    t.teardown(() => c.close());
    const sizes = Array.from({ length: 40 }, (_, i) => 300 + i);
    t.same(
      await Promise.all(sizes.map((n) => c.call('x'.repeat(n)))),
      sizes,
      '40 calls of ~300 bytes in one turn (12 KB) all answered',
    );
    const [small, huge] = await Promise.allSettled([c.call('y'), c.call('z'.repeat(frameLimit * 2))]);
    t.equal((small as PromiseFulfilledResult<unknown>).value, 1, 'a small call beside a huge one is answered');
    t.equal(((huge as PromiseRejectedResult).reason as RpcError).code, 'frame_too_large', 'the huge one fails alone');
    t.equal(await c.call('after'), 5, 'and the connection was never cut');
  },
);

t.test(
  'answers that together pass the frame limit come back in several frames; one too large alone is an error',
  async (t) => {
    const frameLimit = 4096;
    const s = await server(t, (request) => 'a'.repeat(request as number), frameLimit);
    const c = new RpcClient({
      address: `127.0.0.1:${s.port}`,
      token: TOKEN,
      timeoutMs: 2_000,
      maxFrameBytes: frameLimit,
    });
    t.teardown(() => c.close());
    const answers = await Promise.all(Array.from({ length: 30 }, () => c.call(500)));
    t.ok(
      answers.every((a) => a === 'a'.repeat(500)),
      '30 answers of 500 bytes (15 KB) all arrived',
    );
    const huge = (await c.call(frameLimit * 2).catch((e: unknown) => e)) as RpcError;
    t.equal(huge.code, 'frame_too_large', 'an answer larger than a frame is refused for its call only');
    t.equal(await c.call(3), 'aaa', 'the connection lives on');
  },
);
