/**
 * `log`: the replicated event log (@raftkit/log) beside NATS JetStream, both 5 processes on 127.0.0.1 with a
 * stream of 5 replicas, at --size-byte messages (1 KB by default):
 *
 *  - appends: closed loop, --concurrency appends in flight, each acknowledged once committed by the replicas;
 *    appends/s and p50/p99 acknowledged latency. Ours: a topic of 1 partition and 5 replicas, LogClient.append
 *    (the members' binary route to the partition's leader once the client knows it, HTTP before), no idempotence. JetStream: a
 *    stream of num_replicas 5, file storage, js.publish through the `nats` npm client connected to the stream's
 *    leader (the same hop count as ours), no message id. Neither side batches messages into one call.
 *  - consume: right after, top the stream/partition up to 100,000 messages (so both read the same amount), then
 *    read every message back from the start, once; records/s.
 *    Ours: LogClient.fetch from offset 0 in pages of up to 10,000 records / 8 MiB. JetStream: an ordered
 *    consumer's consume() (the client's streaming pull).
 *
 * Durability is each system's default: our members fsync each commit batch (LevelDB sync); nats-server 2.9 writes
 * its file store without an fsync per message (it syncs on a timer) and leans on replication.
 */
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { LogClient } from '@raftkit/log';
import { connect, StorageType, type NatsConnection } from 'nats';
import { measure } from '../measure.js';
import { startOurCluster } from '../ours.js';
import { startJetStream } from '../peers/jetstream.js';
import { BenchError, cpuSeconds, sleep } from '../procs.js';
import { summarizeProfiles } from '../profile.js';
import { round } from '../stats.js';

const MEMBERS = 5;
const REPLICAS = 5;
const TOPIC = 'bench';
const SUBJECT = 'bench.events';
/** Records read back by the consume phase, on both sides (each is topped up to this after its appends; the first
 * this many are read). */
const CONSUME_RECORDS = 100_000;
/** Our topic keeps this many bytes (the most a topic may keep), so retention trims nothing a run reads back. */
const MAX_RETENTION_BYTES = 256 * 1024 * 1024;

interface ConsumeFigures {
  records: number;
  bytes: number;
  seconds: number;
  records_per_s: number;
  mb_per_s: number;
  server_cpu_cores: number;
  /** The reading client's own CPU (this process: JSON parsing for ours, the nats client for JetStream). */
  client_cpu_cores: number;
}

/** Records/s and MB/s of reading `records` of `bytes` in `seconds`. */
export function consumeFigures(
  records: number,
  bytes: number,
  seconds: number,
  serverCpuS: number,
  clientCpuS = 0,
): ConsumeFigures {
  const s = Math.max(seconds, 1e-6);
  return {
    records,
    bytes,
    seconds: round(seconds, 3),
    records_per_s: round(records / s, 0),
    mb_per_s: round(bytes / s / 1e6, 1),
    server_cpu_cores: round(serverCpuS / s, 2),
    client_cpu_cores: round(clientCpuS / s, 2),
  };
}

/** CPU seconds this process has used since `since` (a process.cpuUsage() reading). */
function clientCpuSince(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1e6;
}

function cpuOf(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + (cpuSeconds(pid) ?? 0), 0);
}

/** Consume figures are a run of their own: the median of the rounds' consume throughput, every round listed. */
export function mergeConsumeRounds(median: SideResult, rounds: SideResult[]): SideResult {
  const figures = rounds
    .map((r) => r.consume as ConsumeFigures | undefined)
    .filter((c): c is ConsumeFigures => c !== undefined);
  if (figures.length === 0) return median;
  const sorted = [...figures].sort((a, b) => a.records_per_s - b.records_per_s);
  return {
    ...median,
    consume: sorted[Math.floor((sorted.length - 1) / 2)],
    rounds_consume_records_per_s: figures.map((c) => c.records_per_s),
  };
}

/** Our appends measured again through LogProducer. */
interface ProducerFigures {
  ops_per_sec: number;
  p50_ms: number;
  p99_ms: number;
  server_cpu_us_per_op?: number | null;
}

/** Appends (one record a call) must reach this multiple of JetStream's throughput, with a p99 no higher than its. */
export const APPEND_GOAL_RATIO = 1.5;

export function logGoals(ours: SideResult, peer: SideResult | null): Goal[] {
  if (peer === null) return [];
  const oc = (ours.consume as ConsumeFigures | undefined)?.records_per_s ?? 0;
  const pc = (peer.consume as ConsumeFigures | undefined)?.records_per_s ?? 0;
  const ratio = (a: number, b: number): string => (b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a');
  const cpu = (s: { server_cpu_us_per_op?: number | null }): string =>
    s.server_cpu_us_per_op === null || s.server_cpu_us_per_op === undefined ? 'n/a' : `${s.server_cpu_us_per_op}`;
  const op = (ours.producer as ProducerFigures | undefined) ?? null;
  return [
    {
      goal: `appends/s at least ${APPEND_GOAL_RATIO}x JetStream's at the same concurrency, with a p99 no higher`,
      met: ours.ops_per_sec >= APPEND_GOAL_RATIO * peer.ops_per_sec && ours.p99_ms <= peer.p99_ms,
      detail: `${ours.ops_per_sec} vs ${peer.ops_per_sec} appends/s: ${ratio(ours.ops_per_sec, peer.ops_per_sec)}; p99 ${ours.p99_ms} vs ${peer.p99_ms} ms, p50 ${ours.p50_ms} vs ${peer.p50_ms} ms; server CPU per committed append ${cpu(ours)} vs ${cpu(peer)} us`,
    },
    {
      goal: "consume throughput at least JetStream's",
      met: oc >= pc,
      detail: `${oc} vs ${pc} records/s: ${ratio(oc, pc)}`,
    },
    ...(op === null
      ? []
      : [
          {
            goal: "appends/s through LogProducer at least JetStream's at the same concurrency",
            met: op.ops_per_sec >= peer.ops_per_sec,
            detail: `${op.ops_per_sec} vs ${peer.ops_per_sec} appends/s: ${ratio(op.ops_per_sec, peer.ops_per_sec)}; p99 ${op.p99_ms} vs ${peer.p99_ms} ms, p50 ${op.p50_ms} vs ${peer.p50_ms} ms; server CPU per committed append ${cpu(op)} vs ${cpu(peer)} us`,
          },
        ]),
  ];
}

async function runOurs(o: RunOptions): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster = await startOurCluster({ service: 'log', nodes: MEMBERS, env });
  // One connection per worker, as every HTTP side of the harness has (LogClient's router defaults to 16 per
  // member, which would cap the appends in flight below --concurrency).
  const options = {
    endpoints: cluster.members.map((m) => m.url),
    token: cluster.token,
    timeoutMs: 15_000,
    connections: o.concurrency,
  };
  const client = new LogClient(options);
  try {
    // Members register with the meta group as they come up: until all five have, a topic of 5 replicas is refused.
    let topic: Awaited<ReturnType<LogClient['createTopic']>>;
    const registered = Date.now() + 60_000;
    for (;;) {
      try {
        topic = await client.createTopic(TOPIC, {
          partitions: 1,
          replicas: REPLICAS,
          retention: { max_bytes: MAX_RETENTION_BYTES },
        });
        break;
      } catch (e) {
        if (Date.now() > registered)
          throw new BenchError(`could not create the topic within 60 s: ${(e as Error).message}`);
        await sleep(500);
      }
    }
    process.stderr.write(
      `bench: topic ${TOPIC}: 1 partition, ${topic.replicas} replicas on ${topic.partition_groups[0]?.members.map((m) => m.id).join(',')}\n`,
    );
    // The partition elects its leader after the meta group places it: wait until an append goes through.
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await client.append(TOPIC, 0, [{ value: 'ready' }]);
        break;
      } catch (e) {
        if (Date.now() > deadline)
          throw new BenchError(`the partition took no append within 60 s: ${(e as Error).message}`);
        await sleep(200);
      }
    }
    const leader = (await client.topic(TOPIC)).partition_groups[0]?.leader ?? null;
    const value = 'v'.repeat(o.size);
    const pids = cluster.members.map((m) => m.pid);
    const appends = await measure(
      {
        label: 'ours',
        system: `raftkit event log, ${MEMBERS} members, topic of 1 partition x ${REPLICAS} replicas (LogClient.append, binary route)`,
        members: MEMBERS,
        serverPids: pids,
        op: async () => {
          await client.append(TOPIC, 0, [{ value }]);
        },
        extra: { partition_leader: leader },
      },
      o,
    );
    // The same load through LogProducer, the client programs are meant to use: the sends of one turn leave as one
    // batch (one request, one Raft entry), each acknowledged after commit, as JetStream's client pipelines its
    // publishes on one connection. Reported beside the one-request-per-append figures, as a goal of its own.
    const producer = client.producer(TOPIC);
    const viaProducer = await measure(
      {
        label: 'ours-producer',
        system: `raftkit event log through LogProducer (self-batching, idempotent), same topic`,
        members: MEMBERS,
        serverPids: pids,
        op: async () => {
          await producer.send(value, { partition: 0 });
        },
      },
      o,
    );
    // Both sides read back the same number of records: top the partition up to CONSUME_RECORDS first.
    const held = (await client.fetch(TOPIC, 0, 0, { maxRecords: 1 })).end_offset;
    const batch = Array.from({ length: 100 }, () => ({ value }));
    for (let n = held; n < CONSUME_RECORDS; n += batch.length)
      await client.append(TOPIC, 0, batch.slice(0, Math.min(batch.length, CONSUME_RECORDS - n)));
    // Everything the partition holds, from offset 0 (the warm-up's appends too).
    const cpu0 = cpuOf(pids);
    const client0 = process.cpuUsage();
    const t0 = performance.now();
    let records = 0;
    let bytes = 0;
    // LogClient.scan keeps two pages in flight, so the member builds the next page while this one is parsed (as
    // JetStream's consumer keeps its client and server busy at once).
    for await (const page of client.scan(TOPIC, 0, 0, {
      pageRecords: 5_000,
      maxBytes: 8 * 1024 * 1024,
      pagesInFlight: 2,
    })) {
      for (const r of page) {
        if (records === CONSUME_RECORDS) break;
        bytes += r.value.length;
        records++;
      }
      if (records === CONSUME_RECORDS) break;
    }
    const consume = consumeFigures(
      records,
      bytes,
      (performance.now() - t0) / 1000,
      cpuOf(pids) - cpu0,
      clientCpuSince(client0),
    );
    process.stderr.write(
      `bench: ours consumed ${records} records in ${consume.seconds} s: ${consume.records_per_s} records/s, ${consume.mb_per_s} MB/s (server CPU ${consume.server_cpu_cores} cores, client ${consume.client_cpu_cores})\n`,
    );
    return {
      ...appends,
      consume,
      producer: {
        ops_per_sec: viaProducer.ops_per_sec,
        p50_ms: viaProducer.p50_ms,
        p99_ms: viaProducer.p99_ms,
        server_cpu_us_per_op: viaProducer.server_cpu_us_per_op,
      },
    };
  } finally {
    await client.close();
    await cluster.stop();
    if (o.profileDir !== null) {
      const summary = summarizeProfiles(
        o.profileDir,
        cluster.members.map((m) => m.pid),
      );
      if (summary !== null) process.stderr.write(`bench: CPU profiles of our members in ${o.profileDir}\n${summary}\n`);
    }
  }
}

async function runJetStream(o: RunOptions): Promise<SideResult> {
  const js5 = await startJetStream(MEMBERS);
  const connections: NatsConnection[] = [];
  try {
    const admin = await connect({ servers: js5.nodes.map((n) => `127.0.0.1:${n.clientPort}`) });
    connections.push(admin);
    // The JetStream meta group elects its leader after the routes connect: retry until the stream is created.
    const deadline = Date.now() + 60_000;
    let jsm: Awaited<ReturnType<NatsConnection['jetstreamManager']>>;
    for (;;) {
      try {
        jsm = await admin.jetstreamManager({ timeout: 5_000 });
        await jsm.streams.add({ name: TOPIC, subjects: [SUBJECT], num_replicas: REPLICAS, storage: StorageType.File });
        break;
      } catch (e) {
        if (Date.now() > deadline)
          throw new BenchError(`JetStream did not create the stream within 60 s: ${(e as Error).message}`);
        await sleep(500);
      }
    }
    let leaderName: string | undefined;
    while (leaderName === undefined) {
      const info = await jsm.streams.info(TOPIC);
      leaderName = info.cluster?.leader;
      if (leaderName === undefined) {
        if (Date.now() > deadline) throw new BenchError('the JetStream stream has no leader');
        await sleep(200);
      }
    }
    const leader = js5.nodes.find((n) => n.name === leaderName) ?? js5.nodes[0]!;
    const nc = await connect({ servers: [`127.0.0.1:${leader.clientPort}`], noRandomize: true });
    connections.push(nc);
    const js = nc.jetstream();
    await js.publish(SUBJECT, new TextEncoder().encode('ready'));
    process.stderr.write(
      `bench: JetStream stream ${TOPIC}: ${REPLICAS} replicas, file storage, leader ${leader.name} (client connected to it)\n`,
    );
    const payload = new Uint8Array(o.size).fill(0x76);
    const pids = js5.nodes.map((n) => n.pid);
    const appends = await measure(
      {
        label: 'jetstream',
        system: `NATS JetStream (nats-server ${js5.version}, Debian), ${MEMBERS} servers, stream of ${REPLICAS} replicas, file storage (nats npm client)`,
        members: MEMBERS,
        serverPids: pids,
        op: async () => {
          await js.publish(SUBJECT, payload);
        },
        extra: { stream_leader: leader.name, version: js5.version },
      },
      o,
    );
    // Top the stream up to CONSUME_RECORDS, as on our side (publishes 100 in flight at a time).
    const held = (await jsm.streams.info(TOPIC)).state.messages;
    for (let n = held; n < CONSUME_RECORDS; n += 100) {
      await Promise.all(Array.from({ length: Math.min(100, CONSUME_RECORDS - n) }, () => js.publish(SUBJECT, payload)));
    }
    const total = Math.min(CONSUME_RECORDS, (await jsm.streams.info(TOPIC)).state.messages);
    const cpu0 = cpuOf(pids);
    const client0 = process.cpuUsage();
    const t0 = performance.now();
    const consumer = await js.consumers.get(TOPIC);
    const messages = await consumer.consume({ max_messages: 10_000 });
    let records = 0;
    let bytes = 0;
    for await (const m of messages) {
      records++;
      bytes += m.data.length;
      if (records >= total) break;
    }
    await messages.close();
    const consume = consumeFigures(
      records,
      bytes,
      (performance.now() - t0) / 1000,
      cpuOf(pids) - cpu0,
      clientCpuSince(client0),
    );
    process.stderr.write(
      `bench: JetStream consumed ${records} messages in ${consume.seconds} s: ${consume.records_per_s} records/s, ${consume.mb_per_s} MB/s (server CPU ${consume.server_cpu_cores} cores, client ${consume.client_cpu_cores})\n`,
    );
    return { ...appends, consume };
  } finally {
    for (const c of connections) await c.close().catch(() => undefined);
    await js5.stop();
  }
}

export const logBenchmark: Benchmark = {
  name: 'log',
  description:
    'the event log: appends (acknowledged after commit) and reading everything back, a topic of 5 replicas on 5 members (vs NATS JetStream, 5 servers, replicas 5)',
  title: (o) =>
    `log: ${o.size}-byte appends, ${o.concurrency} in flight, 5 replicas${o.vs !== null ? `, ours vs ${o.vs}` : ''}`,
  peers: ['jetstream'],
  defaults: { durationS: 10, concurrency: 64, size: 1024, warmupS: 2 },
  workload: (o) => ({
    message_bytes: o.size,
    replicas: REPLICAS,
    processes: MEMBERS,
    appends: `closed loop, ${o.concurrency} in flight, one message per call, acknowledged after commit; ours LogClient.append to partition 0, JetStream js.publish (nats npm client, connected to the stream leader)`,
    consume: `both topped up to ${CONSUME_RECORDS.toLocaleString('en-US')} messages, then the first 100,000 read back once, from the start: ours LogClient.scan, pages of 5,000 records / 8 MiB from the leader over the binary route, two in flight; JetStream an ordered consumer (consume(), max_messages 10,000)`,
    durability:
      "each system's default: ours fsyncs every commit batch; nats-server 2.9's file store does not fsync per message",
  }),
  goals: logGoals,
  mergeRounds: mergeConsumeRounds,
  runOurs,
  runPeer: (peer, o) => {
    if (peer !== 'jetstream') throw new Error(`log has no peer ${peer}`);
    return runJetStream(o);
  },
};
