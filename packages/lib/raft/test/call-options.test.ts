/**
 * The embedding API's per-call limits, typed reads and logging hook, on a three-member in-process group: a
 * proposal or read on a leader cut off from its quorum gives up after the call's own timeoutMs (the node's
 * default is ten minutes here) or as soon as its AbortSignal aborts; `read` hands back the user's own machine
 * type; the logger hears leader changes and apply errors.
 */
import t from 'tap';
import { ApplyError, RaftNode, TimeoutError } from '../src/node.js';
import type { LogLevel } from '../src/logger.js';
import { MemoryStorage } from '../src/storage/memory.js';
import { LocalNetwork } from '../src/transport/local.js';
import type { StateMachine } from '../src/types.js';

class Tally implements StateMachine<number, number> {
  total = 0;
  apply(by: number): number {
    if (!Number.isFinite(by)) throw new TypeError('not a number');
    this.total += by;
    return this.total;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(String(this.total));
  }
  restore(data: Uint8Array): void {
    this.total = Number(new TextDecoder().decode(data));
  }
}

const net = new LocalNetwork();
const ids = ['a', 'b', 'c'];
const bootstrap = Object.fromEntries(ids.map((id) => [id, `local:${id}`]));
const logs: Array<{ level: LogLevel; message: string; fields?: Record<string, unknown> }> = [];
const nodes = await Promise.all(
  ids.map((id) =>
    RaftNode.start({
      id,
      bootstrap,
      storage: new MemoryStorage(),
      transport: net.transport(id),
      stateMachine: new Tally(),
      tickMs: 10,
      requestTimeoutMs: 600_000,
      logger: {
        log: (level, message, fields) =>
          void logs.push({ level, message, ...(fields !== undefined ? { fields } : {}) }),
      },
    }),
  ),
);
t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
const deadline = Date.now() + 10_000;
while (!nodes.some((n) => n.isLeader) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
const leader = nodes.find((n) => n.isLeader)!;

t.test('read hands back the machine with its own type; the logger hears leader changes and apply errors', async (t) => {
  t.equal(await leader.propose(5), 5);
  const total: number = await leader.read((machine) => machine.total); // machine: Tally, no cast
  t.equal(total, 5);
  t.equal(
    leader.readLocal((machine) => machine.total),
    5,
  );
  await t.rejects(leader.propose(Number.NaN), ApplyError);
  t.ok(
    logs.some((l) => l.level === 'info' && l.message === 'leader changed' && l.fields?.leader === leader.id),
    'leader change logged',
  );
  t.ok(
    logs.some(
      (l) =>
        l.level === 'error' && /state machine failed/.test(l.message) && /not a number/.test(String(l.fields?.error)),
    ),
    'apply error logged',
  );
});

t.test('a call cut off from its quorum gives up after its own timeout or when aborted', async (t) => {
  const others = ids.filter((id) => id !== leader.id);
  net.partition([leader.id], others);
  t.teardown(() => net.heal());

  const started = Date.now();
  await t.rejects(leader.propose(1, { timeoutMs: 300 }), TimeoutError, 'propose: TimeoutError');
  await t.rejects(
    leader.read((m) => m.total, { timeoutMs: 300 }),
    TimeoutError,
    'read: TimeoutError',
  );
  t.ok(
    Date.now() - started < 60_000,
    `both gave up after their own timeouts (${Date.now() - started} ms), not the node's ten minutes`,
  );

  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  await t.rejects(leader.propose(1, { signal: controller.signal }), { name: 'AbortError' }, 'propose: aborted');
  await t.rejects(
    leader.readBarrier({ signal: AbortSignal.abort(new Error('gone')) }),
    /gone/,
    'an already aborted signal rejects with its reason',
  );
  const reason = new Error('caller left');
  const reading = new AbortController();
  setTimeout(() => reading.abort(reason), 100);
  await t.rejects(
    leader.read((m) => m.total, { signal: reading.signal }),
    reason,
    'read: aborted with the reason',
  );
});

t.test('after healing, the group goes on', async (t) => {
  const d = Date.now() + 20_000;
  let answer: number | null = null;
  while (answer === null && Date.now() < d) {
    const current = nodes.find((n) => n.isLeader);
    if (current !== undefined) answer = await current.propose(1, { timeoutMs: 1_000 }).catch(() => null);
    else await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(answer !== null && answer >= 6, `a proposal applies (${answer})`);
});
