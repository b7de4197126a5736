/** The idle benchmark's pure parts: adding processes up per service, and its two goals (issue 39, part 3). */
import t from 'tap';
import { byService, idleGoals, STACK_CORES_GOAL, type IdleProcess } from '../src/benchmarks/idle.js';

function proc(service: string, id: string, cores: number, rssMb = 60): IdleProcess {
  return {
    service,
    id,
    role: id.startsWith('n') ? 'member' : 'worker',
    pid: 1000 + Math.round(cores * 1e4),
    cores,
    rss_mb: rssMb,
  };
}

t.test('per service: processes added up, busiest service first', async (t) => {
  const services = byService([
    proc('kv', 'n1', 0.002),
    proc('notify', 'n1', 0.004),
    proc('kv', 'n2', 0.003),
    proc('notify', 'delivery1', 0.01, 80),
  ]);
  t.same(
    services.map((s) => [s.service, s.processes, s.cores, s.busiest_process_cores, s.rss_mb]),
    [
      ['notify', 2, 0.014, 0.01, 140],
      ['kv', 2, 0.005, 0.003, 120],
    ],
  );
});

t.test('the stack goal: under 0.3 cores in total', async (t) => {
  const processes = [proc('kv', 'n1', 0.1), proc('kv', 'n2', 0.1)];
  t.equal(idleGoals({ total_cores: 0.2, processes }, null)[0]?.met, true);
  t.equal(idleGoals({ total_cores: STACK_CORES_GOAL, processes }, null)[0]?.met, false, 'exactly 0.3 is not under it');
  t.match(idleGoals({ total_cores: 0.75, processes }, null)[0]?.detail, /0\.75 cores over 2 processes/);
  t.equal(
    idleGoals({ total_cores: 0.2, processes }, null).length,
    1,
    'without etcd the per-process goal is not judged',
  );
});

t.test("the per-process goal: every process under etcd's CPU per member", async (t) => {
  const etcd = { total_cores: 0.05, members: 5 }; // 0.01 per member
  const under = idleGoals(
    { total_cores: 0.02, processes: [proc('kv', 'n1', 0.009), proc('lock', 'n1', 0.002)] },
    etcd,
  )[1]!;
  t.equal(under.met, true);
  t.match(under.detail, /etcd 0\.01 cores per member; our busiest process kv n1 0\.009/);
  const over = idleGoals(
    {
      total_cores: 0.05,
      processes: [proc('kv', 'n1', 0.009), proc('notify', 'delivery1', 0.03), proc('feed', 'n2', 0.01)],
    },
    etcd,
  )[1]!;
  t.equal(over.met, false, 'one process over and one exactly at it');
  t.match(over.detail, /2 of 3 processes at or over it, busiest notify delivery1 0\.03, feed n2 0\.01/);
  t.equal(idleGoals({ total_cores: 0, processes: [] }, etcd)[1]?.met, false, 'no processes measured is no evidence');
});
