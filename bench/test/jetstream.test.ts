/**
 * The JetStream peer of `npx bench log --vs jetstream`: the generated configuration, five real nats-server
 * processes forming one JetStream cluster that holds a stream of 5 replicas (a leader and 4 current replicas),
 * takes publishes and reads them back in order; and the log benchmark's consume figures and goals.
 */
import { connect, StorageType } from 'nats';
import t from 'tap';
import type { SideResult } from '../src/benchmark.js';
import { consumeFigures, logGoals, mergeConsumeRounds } from '../src/benchmarks/log.js';
import { cleanupAll } from '../src/cleanup.js';
import { isAlive, sleep } from '../src/procs.js';
import { jetstreamConfig, startJetStream } from '../src/peers/jetstream.js';

t.teardown(cleanupAll);

t.test('the configuration: loopback listeners, its store, a route to every server', async (t) => {
  const nodes = [1, 2, 3].map((i) => ({ name: `n${i}`, clientPort: 4000 + i, clusterPort: 5000 + i }));
  const conf = jetstreamConfig(nodes[1]!, nodes, '/tmp/x y/n2');
  t.match(conf, /^server_name: n2$/m);
  t.match(conf, /^listen: 127\.0\.0\.1:4002$/m);
  t.match(conf, /store_dir: "\/tmp\/x y\/n2"/);
  t.match(conf, /listen: 127\.0\.0\.1:5002/);
  t.match(conf, /routes: \[nats:\/\/127\.0\.0\.1:5001, nats:\/\/127\.0\.0\.1:5002, nats:\/\/127\.0\.0\.1:5003\]/);
});

t.test('consume figures and the two goals against the peer', async (t) => {
  t.same(consumeFigures(100_000, 102_400_000, 2, 1, 3), {
    records: 100_000,
    bytes: 102_400_000,
    seconds: 2,
    records_per_s: 50_000,
    mb_per_s: 51.2,
    server_cpu_cores: 0.5,
    client_cpu_cores: 1.5,
  });
  const side = (ops: number, consumed: number): SideResult =>
    ({
      system: 's',
      members: 5,
      ops_per_sec: ops,
      ops,
      errors: 0,
      error_kinds: {},
      mean_ms: 1,
      p50_ms: 1,
      p90_ms: 2,
      p99_ms: 3,
      p999_ms: 3,
      max_ms: 3,
      duration_s: 1,
      warmup_s: 0,
      concurrency: 1,
      interrupted: false,
      server_cpu_s: null,
      server_cpu_cores: null,
      server_cpu_us_per_op: null,
      client_cpu_cores: 0,
      consume: consumeFigures(consumed, consumed, 1, 0),
    }) satisfies SideResult;
  t.same(
    logGoals(side(6, 10), side(4, 20)).map((g) => g.met),
    [true, false],
    'appends at 1.5x the peer with the same p99 are met; half its consume is not',
  );
  t.same(
    logGoals(side(5, 20), side(4, 20)).map((g) => g.met),
    [false, true],
    'appends at 1.25x are not enough; a tie on consume is at least the peer',
  );
  t.same(
    logGoals({ ...side(8, 20), p99_ms: 4 }, side(4, 20)).map((g) => g.met),
    [false, true],
    'appends at 2x with a higher p99 are missed',
  );
  t.same(logGoals(side(4, 20), null), [], 'no goals without the peer');
  // With rounds, consume is judged on its own median round, not the median-throughput round's.
  const merged = mergeConsumeRounds(side(5, 90), [side(4, 50), side(5, 90), side(6, 60)]);
  t.equal(merged.ops_per_sec, 5, 'the median round stays whole');
  t.equal((merged.consume as { records_per_s: number }).records_per_s, 60);
  t.same(merged.rounds_consume_records_per_s, [50, 90, 60]);
});

t.test(
  'five nats-server processes: one JetStream cluster, a stream of 5 replicas, publish and read back',
  async (t) => {
    const cluster = await startJetStream(5);
    t.equal(cluster.nodes.length, 5);
    t.match(cluster.version, /^\d+\.\d+\.\d+$/);
    const nc = await connect({ servers: cluster.nodes.map((n) => `127.0.0.1:${n.clientPort}`) });
    t.teardown(() => nc.close());
    let info;
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const jsm = await nc.jetstreamManager({ timeout: 5_000 });
        info = await jsm.streams.add({ name: 't', subjects: ['t.>'], num_replicas: 5, storage: StorageType.File });
        break;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await sleep(500);
      }
    }
    t.equal(info.config.num_replicas, 5);
    const js = nc.jetstream();
    for (let i = 0; i < 20; i++) await js.publish('t.x', new TextEncoder().encode(`m${i}`));
    const jsm = await nc.jetstreamManager();
    const state = await jsm.streams.info('t');
    t.equal(state.state.messages, 20);
    t.ok(state.cluster?.leader !== undefined, `the stream has a leader (${state.cluster?.leader})`);
    t.equal(state.cluster?.replicas?.length, 4, 'and 4 other replicas');
    const consumer = await js.consumers.get('t');
    const messages = await consumer.consume({ max_messages: 100 });
    const seen: string[] = [];
    for await (const m of messages) {
      seen.push(new TextDecoder().decode(m.data));
      if (seen.length === 20) break;
    }
    await messages.close();
    t.same(
      seen,
      Array.from({ length: 20 }, (_, i) => `m${i}`),
      'read back in order',
    );
    await nc.close();
    await cluster.stop();
    t.ok(
      cluster.nodes.every((n) => !isAlive(n.pid)),
      'every server stopped',
    );
  },
);
