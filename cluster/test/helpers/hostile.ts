/**
 * Hostile input against a service (the test files hostile-input-*.test.ts name which), on real processes: every port of every process (members' HTTP and Raft
 * ports, workers' HTTP and binary ports) gets what an attacker would send: malformed and deeply nested JSON,
 * wrong shapes, oversized bodies, broken HTTP, slowloris, and raw garbage on the binary ports. Afterwards every
 * process must still run, answer /healthz, and the service must still take a write. One small cluster per
 * service, shared by all its cases.
 */
import { connect, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { call, inPool, startCluster, until, type Answer, type TestCluster } from '@raftkit/testkit';

interface Target {
  id: string;
  http: string;
  /** host:port of the process's binary listener (Raft port of a member, TCP port of a worker), if any. */
  tcp: string | null;
  pid: number;
}

/**
 * Paths tried on every process besides the routes it lists itself (GET /v1/routes): the known routes of every
 * service, so a process is also tried on other services' paths, and the short-link redirect.
 */
const PATHS = [
  '/healthz',
  '/metrics',
  '/v1/cluster/status',
  '/v1/cluster/members',
  '/v1/cluster/members/n9',
  '/v1/cluster/transfer-leader',
  '/v1/cluster/partition',
  '/v1/client-sessions',
  '/v1/tokens',
  '/v1/kv/k1',
  '/v1/kv/k1/cas',
  '/v1/sessions',
  '/v1/sessions/s1',
  '/v1/sessions/s1/heartbeat',
  '/v1/locks/l1',
  '/v1/locks/l1/acquire',
  '/v1/locks/l1/release',
  '/v1/locks/l1/watch?timeout_ms=1',
  '/v1/rules',
  '/v1/rules/r1',
  '/v1/rule-set',
  '/v1/tenants/t1',
  '/v1/check',
  '/internal/leases',
  '/internal/links',
  '/internal/links/abcdefg',
  '/internal/link-batches',
  '/internal/stats/abcdefg',
  '/internal/replay',
  '/api/urls',
  '/api/urls/abcdefg',
  '/api/urls/abcdefg/stats',
  '/api/keys',
  '/abcdefg',
];

/** Bodies that are not what any route expects. */
const BODIES: Array<[string, string]> = [
  ['truncated JSON', '{"a":'],
  ['not JSON', 'hello world'],
  ['JSON null', 'null'],
  ['JSON number', '42'],
  ['JSON array', '[1,2,3]'],
  ['JSON string', '"x"'],
  ['empty object', '{}'],
  [
    'wrong field types',
    '{"value":{"x":[null]},"long_url":7,"ttl_ms":"soon","client":null,"capacity":-1,"refill_rate":"NaN","id":[]}',
  ],
  ['lone surrogate', '{"value":"\\ud800","to":"\\udfff","long_url":"http://a.example/\\ud800"}'],
  ['control characters', '{"long_url":"http://a.example/x\\r\\nSet-Cookie: a=b","value":"\\u0000"}'],
  ['deep nesting', '['.repeat(200_000) + ']'.repeat(200_000)],
  ['deep object nesting', '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000)],
];

/** Writes raw bytes to host:port, reads whatever comes back for up to `holdMs`, then closes. */
function raw(address: string, bytes: Buffer | string, holdMs = 300): Promise<string> {
  const [host, port] = splitHostPort(address);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket: Socket = connect({ host, port });
    const done = (): void => {
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const timer = setTimeout(done, holdMs);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (c: Buffer) => {
      if (chunks.length < 16) chunks.push(c);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

function splitHostPort(address: string): [string, number] {
  const url = new URL(address.includes('://') ? address : `tcp://${address}`);
  return [url.hostname, Number(url.port)];
}

function targetsOf(cluster: TestCluster): Target[] {
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number; raftAddress: string; httpAddress: string }>;
    workers?: Array<{ id: string; pid: number; httpAddress: string; tcpAddress: string }>;
  };
  return [
    ...state.members.map((m) => ({ id: m.id, http: `http://${m.httpAddress}`, tcp: m.raftAddress, pid: m.pid })),
    ...(state.workers ?? []).map((w) => ({ id: w.id, http: `http://${w.httpAddress}`, tcp: w.tcpAddress, pid: w.pid })),
  ];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** What is wrong with an answer to bad input, or null: never a 500, and a 4xx carries the shared JSON error shape. */
function problemWith(a: Answer): string | null {
  const shown = `${a.status} ${JSON.stringify(a.body).slice(0, 160)}`;
  if (a.status >= 500 && a.status !== 503) return `answered ${shown}`;
  if (a.status >= 400 && a.status < 500 && typeof (a.body.error as { code?: unknown } | undefined)?.code !== 'string')
    return `a ${a.status} without an error code: ${shown}`;
  return null;
}

/** Every process still runs and says it is healthy. */
async function allHealthy(t: Test, targets: Target[]): Promise<void> {
  for (const target of targets) t.ok(alive(target.pid), `${target.id} (pid ${target.pid}) is still running`);
  for (const target of targets) {
    const health = await until(
      `${target.id} healthy`,
      async () => {
        const a = await call(target.http, 'GET', '/healthz').catch(() => null);
        return a !== null && a.status === 200 ? a : null;
      },
      30_000,
    );
    t.equal(health.status, 200, `${target.id} answers /healthz 200`);
  }
}

export interface ServiceCase {
  service: string;
  workers?: string;
  /** A real write through the service's front door, after the attack. */
  write(cluster: TestCluster, targets: Target[]): Promise<Answer>;
}

/** One subtest per service, each on its own small cluster. */
export function runHostileInput(cases: readonly ServiceCase[]): void {
  t.setTimeout(600_000);
  for (const sc of cases) {
    t.test(`${sc.service}: hostile input on every port`, async (t) => {
      const cluster = await startCluster(sc.service, {
        nodes: 3,
        tickMs: 100,
        ...(sc.workers !== undefined ? { workers: sc.workers } : {}),
      });
      t.teardown(() => cluster.down());
      const targets = targetsOf(cluster);

      await t.test('wrong bodies on every route, with the cluster token', async (t) => {
        // Members of one service route alike: one member and every worker get the whole matrix.
        for (const target of [targets[0]!, ...targets.filter((x) => !/^n\d+$/.test(x.id))]) {
          const problems: string[] = [];
          let sent = 0;
          const listed = await call(target.http, 'GET', '/v1/routes', { token: cluster.token });
          const routes = (listed.body.routes ?? []) as Array<{ pattern: string }>;
          t.ok(routes.length > 0, `${target.id} lists its routes`);
          const paths = new Set([...PATHS, ...routes.map((r) => r.pattern.replace(/:[A-Za-z_]+/g, 'x1'))]);
          // Paths go eight at a time: each path's requests stay in order, and the matrix takes seconds, not a minute.
          await inPool([...paths], 8, async (path) => {
            for (const method of ['POST', 'PUT']) {
              for (const [name, body] of BODIES) {
                const a = await call(target.http, method, path, { token: cluster.token, raw: body }).catch(
                  (e: Error) => e,
                );
                sent++;
                const problem = a instanceof Error ? `the request failed (${a.message})` : problemWith(a);
                if (problem !== null) problems.push(`${method} ${path} ${name}: ${problem}`);
              }
            }
            for (const method of ['GET', 'DELETE', 'PATCH']) {
              const a = await call(target.http, method, path, { token: cluster.token }).catch((e: Error) => e);
              sent++;
              const problem = a instanceof Error ? `the request failed (${a.message})` : problemWith(a);
              if (problem !== null) problems.push(`${method} ${path}: ${problem}`);
            }
          });
          problems.sort();
          t.same(
            problems,
            [],
            `${target.id}: ${sent} hostile requests, each refused with a 4xx naming the problem or served`,
          );
        }
      });

      await t.test('oversized bodies are refused, not buffered', async (t) => {
        const big = 'x'.repeat(8 * 1024 * 1024);
        for (const target of targets) {
          const a = await call(target.http, 'POST', '/v1/kv/k1/cas', { token: cluster.token, raw: big }).catch(
            () => null,
          );
          // Refusing with 413 or closing the connection are both fine; a 2xx or a 500 is not.
          if (a !== null) t.ok(a.status >= 400 && a.status < 500, `${target.id}: 8 MiB body refused with ${a.status}`);
          else t.pass(`${target.id}: 8 MiB body refused by closing the connection`);
        }
      });

      await t.test('broken HTTP and slowloris on every HTTP port', async (t) => {
        const broken = [
          'GARBAGE\r\n\r\n',
          'GET /' + 'a'.repeat(100_000) + ' HTTP/1.1\r\nHost: x\r\n\r\n',
          'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ' + 'b'.repeat(100_000) + '\r\n\r\n',
          'GET /%zz%ff/%00 HTTP/1.1\r\nHost: x\r\n\r\n',
          'POST /v1/kv/k1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzzzz\r\nxx\r\n',
          'POST /v1/kv/k1 HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
          'PUT /v1/kv/k1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n0123456789',
          '\x00\x01\x02\x03\xff\xfe'.repeat(1000),
        ];
        // Every target at once, and each target's broken requests at once: each waits up to its hold time.
        await Promise.all(
          targets.map(async (target) => {
            const address = target.http.slice('http://'.length);
            const replies = await Promise.all(broken.map((request) => raw(address, request)));
            replies.forEach((reply, i) =>
              t.notMatch(
                reply,
                /^HTTP\/1\.1 5\d\d/,
                `${target.id}: broken request not answered with 5xx (${JSON.stringify(broken[i]!.slice(0, 40))})`,
              ),
            );
            // Slowloris: headers that never finish, held open while the process keeps serving others.
            const slow = Array.from({ length: 50 }, () =>
              raw(address, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ', 3_000),
            );
            const meanwhile = await call(target.http, 'GET', '/healthz');
            t.equal(meanwhile.status, 200, `${target.id}: answers /healthz while 50 slow clients hold headers open`);
            await Promise.all(slow);
          }),
        );
      });

      await t.test('garbage on every binary port', async (t) => {
        const huge = Buffer.alloc(8);
        huge.writeUInt32BE(0xffff_fff0, 0);
        const garbage = [
          Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
          huge,
          Buffer.from([0, 0, 0, 5, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1]),
          Buffer.from([0, 0, 0, 3, 0x93, 0xc0, 0xc0]),
          Buffer.from(Array.from({ length: 65_536 }, (_, i) => (i * 131 + 7) & 0xff)),
        ];
        for (const target of targets) {
          if (target.tcp === null || target.tcp === '') continue;
          for (const bytes of garbage) await raw(target.tcp, bytes, 200);
          t.ok(alive(target.pid), `${target.id}: still running after garbage on ${target.tcp}`);
        }
      });

      await t.test('every process survives and the service still takes a write', async (t) => {
        await allHealthy(t, targets);
        const a = await until(
          `${sc.service} takes a write`,
          async () => {
            const w = await sc.write(cluster, targets).catch(() => null);
            return w !== null && w.status < 300 ? w : null;
          },
          30_000,
        );
        t.ok(a.status >= 200 && a.status < 300, `${sc.service}: a write after the attack answers ${a.status}`);
      });
    });
  }
}
