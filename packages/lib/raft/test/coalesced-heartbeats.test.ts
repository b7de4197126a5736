/**
 * Coalesced heartbeats on real TCP and LevelDB: 50 active (never quiescing) groups on 3 GroupHosts. Counted on the
 * wire, each host sends each peer about one frame of heartbeats per tick carrying the heartbeats of every group it
 * leads there (and one frame of responses), not one frame per group; and the groups still elect, commit and keep
 * their leaders. A second run with coalescing off is the baseline the counts are compared with.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { GroupHost } from '../src/groups/host.js';
import type { TransportStats } from '../src/transport/tcp.js';
import { Register } from './helpers/machines.js';
import { freePorts } from '@raftkit/testkit';
import { until } from './helpers/transport-member.js';

const GROUPS = 50;
const TICK_MS = 50;
const ids = ['h1', 'h2', 'h3'];
const names = Array.from({ length: GROUPS }, (_, i) => `g${i}`);
const dir = mkdtempSync(join(tmpdir(), 'coalesce-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

interface Window {
  ticks: number;
  /** Per sending host and peer: frames, heartbeat batches, beats, over the window. */
  sent: Array<{
    from: string;
    to: string;
    frames: number;
    messages: number;
    beatFrames: number;
    heartbeatBatches: number;
    responseBatches: number;
    beats: number;
  }>;
  terms: Map<string, string>;
}

/** 50 groups on 3 hosts, one value committed in each; then the wire is counted over `windowMs` of idleness. */
async function run(t: Test, coalesceHeartbeats: boolean, windowMs: number): Promise<Window> {
  const ports = await freePorts(3);
  const hostAddresses = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
  const secret = randomBytes(32);
  const sub = join(dir, coalesceHeartbeats ? 'on' : 'off');
  const hosts = await Promise.all(
    ids.map((id, i) =>
      GroupHost.open({
        id,
        listen: { host: '127.0.0.1', port: ports[i]! },
        secret,
        dataDir: join(sub, id),
        hosts: hostAddresses,
        tickMs: TICK_MS,
        quiesceTicks: 0,
        coalesceHeartbeats,
      }),
    ),
  );
  try {
    await Promise.all(
      hosts.flatMap((host) =>
        names.map((name) =>
          host.createGroup<string, string, Register>(name, {
            members: ids,
            stateMachine: new Register(),
            requestTimeoutMs: 60_000,
          }),
        ),
      ),
    );
    await Promise.all(
      names.map((name, i) => hosts[i % 3]!.group<string, string, Register>(name)!.propose(`${name}:v`)),
    );
    const values = await Promise.all(
      names.map((name) => hosts[0]!.group<string, string, Register>(name)!.read((m) => m.value)),
    );
    t.same(
      values,
      names.map((name) => `${name}:v`),
      `coalescing ${coalesceHeartbeats ? 'on' : 'off'}: every group elected and committed its own value`,
    );
    await hosts[0]!.balanceLeaders();
    await until('leaders on every host', () => ids.every((id) => (hosts[0]!.leaderCounts()[id] ?? 0) >= 5), 60_000);
    // Let the transfers settle, then count.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const leadersOf = () =>
      new Map(
        names.map((name) => [name, `${hosts[0]!.group(name)!.leaderId}@${hosts[0]!.group(name)!.status().term}`]),
      );
    const before = hosts.map((h) => h.wireStats());
    const ticks0 = hosts[0]!.tickCount;
    const terms = leadersOf();
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const after = hosts.map((h) => h.wireStats());
    const ticks = hosts[0]!.tickCount - ticks0;
    const sent: Window['sent'] = [];
    hosts.forEach((host, i) => {
      const a: TransportStats = after[i]!;
      const b: TransportStats = before[i]!;
      for (const to of ids) {
        if (to === host.id) continue;
        const x = a.sent[to]!;
        const y = b.sent[to]!;
        sent.push({
          from: host.id,
          to,
          frames: x.frames - y.frames,
          messages: x.messages - y.messages,
          beatFrames: x.beatFrames - y.beatFrames,
          heartbeatBatches: x.heartbeatBatches - y.heartbeatBatches,
          responseBatches: x.responseBatches - y.responseBatches,
          beats: x.beats - y.beats,
        });
      }
    });
    const now = leadersOf();
    t.same(now, terms, 'no group changed leader or term while the wire was counted');
    t.ok(
      names.every((name) => hosts[0]!.group(name)!.leaderId !== null),
      'every group has a leader',
    );
    return { ticks, sent, terms };
  } finally {
    await Promise.all(hosts.map((h) => h.close()));
  }
}

t.test('50 active groups on 3 hosts: one heartbeat frame per peer per tick', async (t) => {
  const on = await run(t, true, 3000);
  t.ok(on.ticks >= 20, `${on.ticks} ticks counted`);
  for (const s of on.sent) {
    const perTick = s.heartbeatBatches / on.ticks;
    t.comment(
      `${s.from}->${s.to}: ${s.frames} frames in ${on.ticks} ticks, ${s.beatFrames} of them heartbeat batches (${s.heartbeatBatches} with heartbeats, ${s.responseBatches} with responses) carrying ${s.beats} beats`,
    );
    // About one batch of heartbeats per tick (a tick's timer callback can be split by a late I/O turn, hence a bound).
    t.ok(
      s.heartbeatBatches > 0 && perTick <= 1.5,
      `${s.from}->${s.to}: ${perTick.toFixed(2)} frames with heartbeats per tick`,
    );
    // Heartbeats one way, responses the other: at most a frame of each per tick, plus the odd split.
    t.ok(
      s.beatFrames / on.ticks <= 3,
      `${s.from}->${s.to}: ${(s.beatFrames / on.ticks).toFixed(2)} heartbeat frames per tick in all`,
    );
    t.ok(
      s.beats / s.beatFrames >= 5,
      `${s.from}->${s.to}: ${(s.beats / s.beatFrames).toFixed(1)} heartbeats per frame`,
    );
    // A heartbeat batch also tells the peer this process is alive, so the tick's ping is left out.
    t.ok(
      s.frames / on.ticks <= 3,
      `${s.from}->${s.to}: ${(s.frames / on.ticks).toFixed(2)} frames per tick of every kind (pings included)`,
    );
  }
  // The same cluster without coalescing: one message per heartbeat and per response (the messages of one write
  // still share a batch frame).
  const off = await run(t, false, 3000);
  const framesOn = on.sent.reduce((n, s) => n + s.frames, 0) / on.ticks;
  const framesOff = off.sent.reduce((n, s) => n + s.frames, 0) / off.ticks;
  const messagesOff = off.sent.reduce((n, s) => n + s.messages, 0) / off.ticks;
  t.equal(
    off.sent.reduce((n, s) => n + s.beatFrames, 0),
    0,
    'no batches when coalescing is off',
  );
  t.ok(
    messagesOff > framesOn * 5,
    `over all links per tick: ${framesOn.toFixed(1)} frames coalesced, ${messagesOff.toFixed(1)} messages without`,
  );
  t.ok(
    framesOff * 5 < messagesOff,
    `without coalescing, ${messagesOff.toFixed(1)} messages per tick leave in ${framesOff.toFixed(1)} (batch) frames`,
  );
});
