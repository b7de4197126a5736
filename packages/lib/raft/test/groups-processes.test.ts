/**
 * 1,000 groups on 5 OS processes (each group on 3 of them, so 600 groups a process), over TCP and LevelDB: a
 * process killed with SIGKILL and restarted on its directory, then one partitioned away and healed. Every write
 * acknowledged before is read back after, and no group ever has two leaders in one term (sampled from every
 * process all along).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { freePorts } from '@raftkit/testkit';

const GROUPS = 1000;
const IDS = ['p1', 'p2', 'p3', 'p4', 'p5'];
const script = fileURLToPath(new URL('./helpers/group-process.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'groups-processes-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

interface Proc {
  child: ChildProcess;
  call(request: object, timeoutMs?: number): Promise<Record<string, unknown>>;
}

let list = '';
const secret = randomBytes(16).toString('hex');
const groups = Array.from({ length: GROUPS }, (_, i) => ({
  name: `g${i}`,
  members: [IDS[i % 5]!, IDS[(i + 1) % 5]!, IDS[(i + 2) % 5]!],
}));
const groupsOf = (id: string) => groups.filter((g) => g.members.includes(id));

function start(id: string): Promise<Proc> {
  const child = spawn(process.execPath, [script, id, join(dir, id), secret, list], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting = new Map<number, (answer: Record<string, unknown>) => void>();
  let next = 1;
  let ready: () => void;
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const answer = JSON.parse(line) as Record<string, unknown>;
    if (answer.ready === true) return ready();
    waiting.get(answer.id as number)?.(answer);
    waiting.delete(answer.id as number);
  });
  const proc: Proc = {
    child,
    call: (request, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        const id = next++;
        const timer = setTimeout(
          () => reject(new Error(`no answer to ${JSON.stringify(request).slice(0, 80)} in ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiting.set(id, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        child.stdin!.write(`${JSON.stringify({ ...request, id })}\n`);
      }),
  };
  return isReady.then(() => proc);
}

t.test(
  '1,000 groups on 5 processes: a kill, a restart and a partition lose no acknowledged write; one leader per term',
  async (t) => {
    const ports = await freePorts(5);
    list = IDS.map((id, i) => `${id}=127.0.0.1:${ports[i]}`).join(',');
    const procs = new Map<string, Proc>();
    t.teardown(() => {
      for (const p of procs.values()) p.child.kill('SIGKILL');
    });
    for (const [id, p] of await Promise.all(IDS.map(async (id) => [id, await start(id)] as const))) procs.set(id, p);
    await Promise.all(IDS.map((id) => procs.get(id)!.call({ op: 'create', groups: groupsOf(id) })));

    // Leaders seen per (group, term), from every live process, every 500 ms.
    const leaders = new Map<string, Set<string>>();
    let sampling = true;
    const sample = async (): Promise<void> => {
      while (sampling) {
        await Promise.all(
          [...procs.values()].map((p) =>
            p.call({ op: 'status' }, 10_000).then(
              (answer) => {
                for (const [name, term, role, leader] of answer.groups as Array<
                  [string, number, string, string | null]
                >) {
                  if (role !== 'leader' || leader === null) continue;
                  const key = `${name}@${term}`;
                  (leaders.get(key) ?? leaders.set(key, new Set()).get(key)!).add(leader);
                }
              },
              () => undefined, // a process being killed
            ),
          ),
        );
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    const sampler = sample();

    /** Writes `value` to every group through a live member that is not `avoid`; retries what failed (elections). */
    const writeAll = async (value: string, avoid: string[]): Promise<number> => {
      let pending = groups;
      for (let round = 0; round < 5 && pending.length > 0; round++) {
        const byProc = new Map<string, typeof groups>();
        for (const g of pending) {
          const via = g.members.filter((m) => !avoid.includes(m))[round % 2]!;
          (byProc.get(via) ?? byProc.set(via, []).get(via)!).push(g);
        }
        const failed: typeof groups = [];
        await Promise.all(
          [...byProc].map(async ([via, gs]) => {
            const answer = await procs
              .get(via)!
              .call({ op: 'write', writes: gs.map((g) => ({ group: g.name, value: `${g.name}:${value}` })) });
            (answer.results as Array<true | string>).forEach((r, i) => {
              if (r !== true) failed.push(gs[i]!);
            });
          }),
        );
        pending = failed;
      }
      return GROUPS - pending.length;
    };

    t.equal(await writeAll('v1', []), GROUPS, 'every group took its first write');

    procs.get('p5')!.child.kill('SIGKILL');
    procs.delete('p5');
    t.equal(await writeAll('v2', ['p5']), GROUPS, 'with p5 killed, every group (600 of them on p5) still takes writes');

    procs.set('p5', await start('p5'));
    await procs.get('p5')!.call({ op: 'create', groups: groupsOf('p5') });

    // p1 is cut off from the others, both ways.
    await procs.get('p1')!.call({ op: 'block', peers: IDS.filter((id) => id !== 'p1') });
    await Promise.all(IDS.filter((id) => id !== 'p1').map((id) => procs.get(id)!.call({ op: 'block', peers: ['p1'] })));
    t.equal(
      await writeAll('v3', ['p1']),
      GROUPS,
      'with p1 partitioned away, every group takes writes through the others',
    );
    await Promise.all(IDS.map((id) => procs.get(id)!.call({ op: 'block', peers: [] })));

    // Read back every group through each of its members (linearizable reads): the last acknowledged write.
    const wrong: string[] = [];
    await Promise.all(
      IDS.map(async (id) => {
        const mine = groupsOf(id);
        const answer = await procs.get(id)!.call({ op: 'read', groups: mine.map((g) => g.name) }, 120_000);
        (answer.results as unknown[]).forEach((value, i) => {
          if (value !== `${mine[i]!.name}:v3`) wrong.push(`${id}/${mine[i]!.name}: ${JSON.stringify(value)}`);
        });
      }),
    );
    t.same(
      wrong.slice(0, 10),
      [],
      `every member of every group reads the last acknowledged write (${wrong.length} wrong)`,
    );

    sampling = false;
    await sampler;
    const twoLeaders = [...leaders]
      .filter(([, who]) => who.size > 1)
      .map(([key, who]) => `${key}: ${[...who].join(',')}`);
    t.ok(leaders.size >= GROUPS, `${leaders.size} (group, term) leaderships observed`);
    t.same(twoLeaders, [], 'no group had two leaders in one term');
  },
);
