/**
 * The multi-process example (examples/ledger/member.ts) as three OS processes over TCP and LevelDB: money moves,
 * a refused transfer is an error for its proposer and the group goes on, the leader is killed with SIGKILL, the
 * survivors elect another and take writes, and the killed member, started again on its directory, reads back
 * every balance (a linearizable read through it).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { freePorts } from '@raftkit/testkit';

t.setTimeout(120_000);

interface Answer {
  id: number | null;
  ok: boolean;
  result?: unknown;
  error?: string;
  refused?: boolean;
}

const script = fileURLToPath(new URL('../examples/ledger/member.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ledger-'));
const secret = randomBytes(32).toString('hex');
const ids = ['m1', 'm2', 'm3'];
const ports = await freePorts(3);
const list = ids.map((id, i) => `${id}=127.0.0.1:${ports[i]}`).join(',');

class Member {
  private child!: ChildProcessWithoutNullStreams;
  private waiting = new Map<number, (a: Answer) => void>();
  private next = 1;
  ready!: Promise<void>;
  constructor(readonly id: string) {}

  start(): void {
    this.child = spawn(process.execPath, [script, this.id, join(dir, this.id), secret, list]);
    this.child.stderr.on('data', () => {});
    let readyNow!: () => void;
    this.ready = new Promise((r) => (readyNow = r));
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const answer = JSON.parse(line) as Answer;
      if (answer.id === 0) readyNow();
      else if (answer.id !== null) this.waiting.get(answer.id)?.(answer);
    });
  }

  ask(request: object, timeoutMs = 15_000): Promise<Answer> {
    const id = this.next++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ id, ok: false, error: 'no answer in time' }), timeoutMs);
      this.waiting.set(id, (a) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(a);
      });
      this.child.stdin.write(`${JSON.stringify({ id, ...request })}\n`);
    });
  }

  kill(signal: NodeJS.Signals): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      this.child.once('exit', () => resolve());
      this.child.kill(signal);
    });
  }
}

const members = ids.map((id) => new Member(id));
t.teardown(async () => {
  await Promise.all(members.map((m) => m.kill('SIGKILL')));
  rmSync(dir, { recursive: true, force: true });
});

async function leaderAmong(candidates: Member[]): Promise<Member> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    for (const m of candidates) {
      const leader = ((await m.ask({ status: true }, 2_000)).result as { leader?: string | null } | undefined)?.leader;
      const found = candidates.find((c) => c.id === leader);
      if (found !== undefined) return found;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('no leader among the candidates');
}

t.test(
  'three processes replicate a ledger, survive a killed leader, and the restarted member reads it back',
  async (t) => {
    for (const m of members) m.start();
    await Promise.all(members.map((m) => m.ready));
    const leader = await leaderAmong(members);
    const follower = members.find((m) => m !== leader)!;

    const deposit = await follower.ask({ deposit: { account: 'alice', amount: 100 } });
    t.equal(deposit.result, 100, `a deposit through follower ${follower.id} (forwarded to the leader) applies`);
    const transfer = await leader.ask({ transfer: { from: 'alice', to: 'bob', amount: 30 } });
    t.equal(transfer.result, 70, 'a transfer applies');
    const overdraft = await follower.ask({ transfer: { from: 'bob', to: 'alice', amount: 31 } });
    t.equal(overdraft.ok, false, 'an overdraft is refused');
    t.equal(overdraft.refused, true, 'as an ApplyError from the state machine');
    t.match(overdraft.error, /insufficient funds: bob has 30/);

    await leader.kill('SIGKILL');
    const survivors = members.filter((m) => m !== leader);
    const next = await leaderAmong(survivors);
    t.not(next.id, leader.id, `the survivors elected ${next.id}`);
    const after = await survivors.find((m) => m !== next)!.ask({ deposit: { account: 'carol', amount: 5 } });
    t.equal(after.result, 5, 'the group takes writes without the killed member');

    leader.start();
    await leader.ready;
    let balances: unknown = null;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const read = await leader.ask({ balances: true }, 5_000);
      if (read.ok) {
        balances = read.result;
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    t.same(
      balances,
      { alice: 70, bob: 30, carol: 5 },
      'the restarted member reads back every balance, the write it missed included',
    );
    await Promise.all(members.map((m) => m.kill('SIGTERM')));
  },
);
