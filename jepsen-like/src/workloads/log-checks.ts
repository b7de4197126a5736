/**
 * The checks of the event-log workload, pure functions of a history (no sockets, no clocks), so tests can feed
 * them hand-made histories with a lost acknowledgement, a duplicate delivery, a skip and a reorder.
 *
 * History shapes (see workloads/log.ts):
 * - `send`: invoke value {producer, seq, partition, values}; ok value adds {offset (the batch's base), count,
 *   duplicate}. A retry of an unknown (`info`) batch is a new `send` with the same producer, seq and values.
 * - `committed`: invoke value {session, group, partition}; ok value {..., offset} (a consumer (re)starting).
 * - `poll`: invoke value {session, group, partition, from}; ok value adds {records: [[offset, value], ...], next}.
 * - `commit`: invoke value {session, group, partition, expect, offset} (expect null: the setup's unconditional
 *   commit of 0); fail with error offset_conflict when another consumer moved it.
 * - `read-log` (final, linearizable): invoke value {partition}; ok value {partition, records, end}.
 *
 * Checks:
 * - log-acked-present: every acknowledged append is in the final log at the offset its acknowledgement gave;
 * - log-integrity: offsets of each partition are contiguous from 0; every record read anywhere agrees with the
 *   final log; no value appears that was never attempted, none appears twice (idempotence), none that certainly
 *   failed appears; a producer's batches on a partition are stored in sequence order; producers are never told
 *   their state was lost (unknown_producer, out_of_order_sequence on a retry);
 * - log-consumer-groups: per group and partition, the committed segments [expect, offset) of successful commits
 *   tile [0, end) with no overlap (duplicate) and no gap (skip), every session resumed exactly at the offset it
 *   read as committed, each session's polls were contiguous and in order, and each committed segment was
 *   delivered to its committing session exactly once, in order, with the log's values; so every acknowledged
 *   append was processed exactly once per group.
 */
import type { HistoryEvent } from '../history.js';
import type { Anomaly, CheckResult } from './workload.js';

type Rec = [offset: number, value: string];

export interface PairedOp {
  process: number;
  f: string;
  type: 'ok' | 'fail' | 'info' | 'open';
  input: Record<string, unknown>;
  output: Record<string, unknown> | null;
  error?: string;
  node?: string;
  start: number;
  end: number | null;
}

/** Invocations matched with their completions (per process, in order); an invocation never completed is `open`. */
export function pairOps(events: readonly HistoryEvent[]): PairedOp[] {
  const open = new Map<number, PairedOp>();
  const ops: PairedOp[] = [];
  for (const e of events) {
    if (typeof e.process !== 'number') continue;
    if (e.type === 'invoke') {
      const op: PairedOp = {
        process: e.process,
        f: e.f,
        type: 'open',
        input: asObject(e.value),
        output: null,
        start: e.time,
        end: null,
        ...(e.node !== undefined ? { node: e.node } : {}),
      };
      open.set(e.process, op);
      ops.push(op);
    } else {
      const op = open.get(e.process);
      if (op === undefined || op.f !== e.f) continue;
      open.delete(e.process);
      op.type = e.type;
      op.end = e.time;
      op.output = e.type === 'ok' ? asObject(e.value) : null;
      if (e.error !== undefined) op.error = e.error;
      if (e.type !== 'ok' && e.value !== undefined && typeof e.value === 'object') op.output = asObject(e.value);
    }
  }
  return ops;
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) ? value : null;
}

function recordsOf(value: unknown): Rec[] {
  if (!Array.isArray(value)) return [];
  return value.filter((r): r is Rec => Array.isArray(r) && typeof r[0] === 'number' && typeof r[1] === 'string');
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function anomaly(check: string, type: string, description: string, times: Array<number | null> = []): Anomaly {
  return { check, type, description, times: times.filter((t): t is number => t !== null) };
}

/** Shown at most this many of one type (the count is in the stats). */
const MAX_PER_TYPE = 20;

class Findings {
  readonly list: Anomaly[] = [];
  readonly counts: Record<string, number> = {};
  constructor(private readonly check: string) {}
  add(type: string, description: string, times: Array<number | null> = []): void {
    this.counts[type] = (this.counts[type] ?? 0) + 1;
    if (this.counts[type]! <= MAX_PER_TYPE) this.list.push(anomaly(this.check, type, description, times));
  }
}

interface FinalLog {
  /** Values by offset, index = offset, for offsets 0..end-1 as read after the heal. */
  values: Map<number, string>;
  end: number;
  time: number;
}

/** The final (linearizable) read of each partition, the last successful one. */
function finalLogs(ops: readonly PairedOp[]): Map<number, FinalLog> {
  const logs = new Map<number, FinalLog>();
  for (const op of ops) {
    if (op.f !== 'read-log' || op.type !== 'ok' || op.output === null) continue;
    const partition = num(op.output.partition);
    const end = num(op.output.end);
    if (partition === null || end === null) continue;
    const values = new Map<number, string>();
    for (const [offset, value] of recordsOf(op.output.records)) values.set(offset, value);
    logs.set(partition, { values, end, time: op.end ?? op.start });
  }
  return logs;
}

function partitionsOf(ops: readonly PairedOp[]): number[] {
  const set = new Set<number>();
  for (const op of ops) {
    const p = num(op.input.partition);
    if (p !== null) set.add(p);
  }
  return [...set].sort((a, b) => a - b);
}

interface Ack {
  producer: string;
  seq: number;
  partition: number;
  value: string;
  offset: number;
  time: number | null;
}

function acks(ops: readonly PairedOp[]): Ack[] {
  const out: Ack[] = [];
  for (const op of ops) {
    if (op.f !== 'send' || op.type !== 'ok' || op.output === null) continue;
    const base = num(op.output.offset);
    const partition = num(op.input.partition);
    const seq = num(op.input.seq);
    if (base === null || partition === null || seq === null) continue;
    strings(op.input.values).forEach((value, i) =>
      out.push({ producer: String(op.input.producer), seq, partition, value, offset: base + i, time: op.end }),
    );
  }
  return out;
}

/** Every acknowledged append is in the final log, at the offset it was acknowledged with. */
export function checkAckedPresent(
  events: readonly HistoryEvent[],
  ops: readonly PairedOp[] = pairOps(events),
): CheckResult {
  const name = 'log-acked-present';
  const found = new Findings(name);
  const logs = finalLogs(ops);
  const all = acks(ops);
  const unreadPartitions = new Set<number>();
  let present = 0;
  for (const a of all) {
    const log = logs.get(a.partition);
    if (log === undefined) {
      unreadPartitions.add(a.partition);
      continue;
    }
    const there = log.values.get(a.offset);
    if (there === a.value) {
      present++;
      continue;
    }
    const elsewhere = [...log.values].find(([, v]) => v === a.value);
    if (elsewhere !== undefined)
      found.add(
        'moved',
        `acknowledged ${a.value} (producer ${a.producer} seq ${a.seq}) at partition ${a.partition} offset ${a.offset}, but the log holds it at offset ${elsewhere[0]}`,
        [a.time],
      );
    else
      found.add(
        'lost',
        `acknowledged ${a.value} (producer ${a.producer} seq ${a.seq}) at partition ${a.partition} offset ${a.offset} is not in the final log (offset ${a.offset} holds ${there === undefined ? 'nothing' : JSON.stringify(there)}, end ${log.end})`,
        [a.time],
      );
  }
  for (const p of unreadPartitions) found.add('unread', `partition ${p} could not be read after the heal`);
  const valid = found.list.some((a) => a.type !== 'unread') ? false : unreadPartitions.size > 0 ? 'unknown' : true;
  const sends = ops.filter((op) => op.f === 'send');
  const stats = {
    acknowledged: all.length,
    present,
    sends_ok: sends.filter((op) => op.type === 'ok').length,
    sends_unknown: sends.filter((op) => op.type === 'info' || op.type === 'open').length,
    // Retries whose first attempt had been stored: the producer's id and sequence kept them from being stored twice.
    retries_deduplicated: sends.filter((op) => op.type === 'ok' && op.output?.duplicate === true).length,
  };
  return { name, valid, anomalies: found.list, stats: { ...stats, ...found.counts } };
}

/** Offsets contiguous, reads agree with the log, no phantom, no duplicate, producers' batches in order. */
export function checkLogIntegrity(
  events: readonly HistoryEvent[],
  ops: readonly PairedOp[] = pairOps(events),
): CheckResult {
  const name = 'log-integrity';
  const found = new Findings(name);
  const logs = finalLogs(ops);
  // What each value was: attempted where, failed for certain?
  const attempted = new Map<string, { partition: number; producer: string; seq: number }>();
  const certainlyFailed = new Set<string>();
  const maybe = new Set<string>();
  for (const op of ops) {
    if (op.f !== 'send') continue;
    const partition = num(op.input.partition);
    const seq = num(op.input.seq);
    if (partition === null || seq === null) continue;
    for (const value of strings(op.input.values)) {
      attempted.set(value, { partition, producer: String(op.input.producer), seq });
      if (op.type === 'fail') certainlyFailed.add(value);
      else maybe.add(value);
    }
    if (op.error === 'unknown_producer' || op.error === 'out_of_order_sequence') {
      found.add(
        'producer-state-lost',
        `producer ${String(op.input.producer)} seq ${seq} on partition ${partition} was refused with ${op.error}: the partition lost track of the producer's batches`,
        [op.start, op.end],
      );
    }
  }
  let records = 0;
  for (const [partition, log] of logs) {
    records += log.end;
    for (let offset = 0; offset < log.end; offset++)
      if (!log.values.has(offset))
        found.add(
          'offset-gap',
          `partition ${partition}: offset ${offset} is missing from the final log (end ${log.end})`,
          [log.time],
        );
    for (const offset of log.values.keys())
      if (offset >= log.end)
        found.add('offset-gap', `partition ${partition}: offset ${offset} read past the end ${log.end}`, [log.time]);
    const seen = new Map<string, number>();
    const byProducer = new Map<string, Array<{ seq: number; offset: number }>>();
    for (const [offset, value] of [...log.values].sort((a, b) => a[0] - b[0])) {
      const a = attempted.get(value);
      if (a === undefined)
        found.add(
          'phantom',
          `partition ${partition} offset ${offset} holds ${JSON.stringify(value)}, which no producer ever sent`,
          [log.time],
        );
      else if (a.partition !== partition)
        found.add(
          'phantom',
          `partition ${partition} offset ${offset} holds ${value}, sent to partition ${a.partition}`,
          [log.time],
        );
      else if (certainlyFailed.has(value) && !maybe.has(value))
        found.add(
          'failed-present',
          `partition ${partition} offset ${offset} holds ${value}, whose append certainly failed`,
          [log.time],
        );
      const prior = seen.get(value);
      if (prior !== undefined)
        found.add(
          'duplicate-append',
          `partition ${partition}: ${value} is stored twice, at offsets ${prior} and ${offset} (a retried batch stored again)`,
          [log.time],
        );
      seen.set(value, offset);
      if (a !== undefined && a.partition === partition) {
        const list = byProducer.get(a.producer) ?? [];
        list.push({ seq: a.seq, offset });
        byProducer.set(a.producer, list);
      }
    }
    for (const [producer, list] of byProducer) {
      for (let i = 1; i < list.length; i++) {
        if (list[i]!.seq < list[i - 1]!.seq)
          found.add(
            'reorder',
            `partition ${partition}: producer ${producer}'s batch ${list[i]!.seq} is stored after its batch ${list[i - 1]!.seq} (offsets ${list[i - 1]!.offset}, ${list[i]!.offset})`,
            [log.time],
          );
      }
    }
  }
  // Every record read by a consumer agrees with the final log.
  let read = 0;
  for (const op of ops) {
    if (op.f !== 'poll' || op.type !== 'ok' || op.output === null) continue;
    const partition = num(op.input.partition);
    const log = partition === null ? undefined : logs.get(partition);
    if (log === undefined) continue;
    for (const [offset, value] of recordsOf(op.output.records)) {
      read++;
      const there = log.values.get(offset);
      if (there !== value)
        found.add(
          'divergent',
          `partition ${partition} offset ${offset} was read as ${value} (session ${String(op.input.session)}) but the final log holds ${there === undefined ? 'nothing' : there}`,
          [op.end],
        );
    }
  }
  const valid =
    found.list.length === 0
      ? logs.size === partitionsOf(ops.filter((o) => o.f === 'send')).length
        ? true
        : 'unknown'
      : false;
  return {
    name,
    valid,
    anomalies: found.list,
    stats: {
      partitions: logs.size,
      records,
      attempted_values: attempted.size,
      records_read_by_consumers: read,
      ...found.counts,
    },
  };
}

interface Segment {
  from: number;
  to: number;
  session: string;
  type: 'ok' | 'info';
  time: number | null;
}

/**
 * Exactly once per consumer group: per group and partition, the segments of successful commits tile [0, end);
 * each was delivered, once and in order, to the session that committed it; sessions resume at the committed
 * offset they read.
 */
export function checkConsumerGroups(
  events: readonly HistoryEvent[],
  ops: readonly PairedOp[] = pairOps(events),
): CheckResult {
  const name = 'log-consumer-groups';
  const found = new Findings(name);
  const logs = finalLogs(ops);
  const ackedByPartition = new Map<number, Ack[]>();
  for (const a of acks(ops)) ackedByPartition.set(a.partition, [...(ackedByPartition.get(a.partition) ?? []), a]);

  // Sessions: what each delivered (offset -> times delivered, in order) and where it started.
  interface Session {
    id: string;
    group: string;
    partition: number;
    start: number | null;
    position: number | null;
    delivered: Rec[];
    startTime: number;
  }
  const sessions = new Map<string, Session>();
  const sessionOf = (op: PairedOp): Session | null => {
    const id = op.input.session;
    const group = op.input.group;
    const partition = num(op.input.partition);
    if (typeof id !== 'string' || typeof group !== 'string' || partition === null) return null;
    let s = sessions.get(id);
    if (s === undefined) {
      s = { id, group, partition, start: null, position: null, delivered: [], startTime: op.start };
      sessions.set(id, s);
    }
    return s;
  };
  const commits = new Map<string, { ok: Segment[]; info: Segment[] }>();
  /** Committed offsets read, per group/partition: an unknown commit to one of them took effect. */
  const readOffsets = new Map<string, Set<number>>();
  /** Group/partitions the final drain finished: the committed offset it read or committed last. */
  const finalReached = new Map<string, number>();
  let crashes = 0;
  let conflicts = 0;
  let pollsOk = 0;
  for (const op of ops) {
    if (op.f === 'crash') crashes++;
    if (op.f !== 'committed' && op.f !== 'poll' && op.f !== 'commit') continue;
    if (op.f === 'commit' && op.input.expect === null) continue; // the setup's unconditional commit (of 0)
    const s = sessionOf(op);
    if (s === null) continue;
    if (op.f === 'committed') {
      if (op.type !== 'ok' || op.output === null) continue;
      const offset = num(op.output.offset) ?? 0;
      const readKey = `${s.group}/${s.partition}`;
      readOffsets.set(readKey, (readOffsets.get(readKey) ?? new Set<number>()).add(offset));
      if (s.id.startsWith('final.') && offset >= (logs.get(s.partition)?.end ?? Number.POSITIVE_INFINITY))
        finalReached.set(readKey, offset);
      if (s.start !== null) continue;
      s.start = offset;
      s.position = offset;
    } else if (op.f === 'poll') {
      if (op.type !== 'ok' || op.output === null) continue;
      pollsOk++;
      const from = num(op.input.from);
      const recs = recordsOf(op.output.records);
      if (s.position !== null && from !== s.position) {
        found.add(
          from !== null && from < s.position ? 'duplicate' : 'skip',
          `session ${s.id} (group ${s.group}, partition ${s.partition}) fetched from ${from} while its position was ${s.position}`,
          [op.start],
        );
      }
      let expected = from;
      for (const [offset, value] of recs) {
        if (expected !== null && offset !== expected) {
          // Before the committed offset the session resumed at, or already delivered to it: delivered again.
          const again = (s.start !== null && offset < s.start) || s.delivered.some(([o]) => o === offset);
          const type = offset < expected ? (again ? 'duplicate' : 'reorder') : 'skip';
          found.add(
            type,
            `session ${s.id} (group ${s.group}, partition ${s.partition}) was delivered offset ${offset} where ${expected} was next (fetch from ${from})`,
            [op.end],
          );
        }
        s.delivered.push([offset, value]);
        expected = offset + 1;
      }
      const next = num(op.output.next);
      s.position = next ?? (recs.length > 0 ? recs[recs.length - 1]![0] + 1 : from);
    } else {
      const key = `${String(op.input.group)}/${String(op.input.partition)}`;
      const entry = commits.get(key) ?? { ok: [], info: [] };
      commits.set(key, entry);
      const expect = num(op.input.expect);
      const offset = num(op.input.offset);
      if (offset === null) continue;
      if (op.type === 'fail' && op.error === 'offset_conflict') conflicts++;
      if (expect === null) continue;
      const segment: Segment = {
        from: expect,
        to: offset,
        session: s.id,
        type: op.type === 'ok' ? 'ok' : 'info',
        time: op.end ?? op.start,
      };
      if (op.type === 'ok') entry.ok.push(segment);
      if (op.type === 'ok' && s.id.startsWith('final.')) finalReached.set(key, offset);
      else if (op.type === 'info' || op.type === 'open') entry.info.push(segment);
    }
  }
  for (const s of sessions.values()) {
    if (s.start === null && s.delivered.length > 0)
      found.add('skip', `session ${s.id} was delivered records without reading its group's committed offset`, [
        s.startTime,
      ]);
  }
  const undrained = new Set<string>();
  // Per group and partition: the chain of committed segments from 0.
  const consumedByGroup: Record<string, number> = {};
  const groups = new Set<string>();
  for (const key of commits.keys()) groups.add(key.slice(0, key.lastIndexOf('/')));
  for (const [key, { ok, info }] of commits) {
    const group = key.slice(0, key.lastIndexOf('/'));
    const partition = Number(key.slice(key.lastIndexOf('/') + 1));
    for (const seg of ok)
      if (seg.to < seg.from)
        found.add(
          'rewind',
          `group ${group} partition ${partition}: session ${seg.session} moved the committed offset back from ${seg.from} to ${seg.to}`,
          [seg.time],
        );
    const okFrom = new Map<number, Segment[]>();
    for (const seg of ok) if (seg.to > seg.from) okFrom.set(seg.from, [...(okFrom.get(seg.from) ?? []), seg]);
    const infoFrom = new Map<number, Segment[]>();
    for (const seg of info) if (seg.to > seg.from) infoFrom.set(seg.from, [...(infoFrom.get(seg.from) ?? []), seg]);
    for (const [from, oks] of okFrom) {
      if (oks.length > 1) {
        found.add(
          'duplicate',
          `group ${group} partition ${partition}: ${oks.length} commits from offset ${from} succeeded (sessions ${oks.map((s) => `${s.session} to ${s.to}`).join(', ')}): records were consumed twice`,
          oks.map((s) => s.time),
        );
      }
    }
    // The chain from 0: a successful commit from where it stands is on it (compare-and-set: it applied when the
    // committed offset was there). Where none is, an unknown commit took effect if the chain visibly goes on from
    // its end (a later successful commit starts there, or a consumer read it as committed); of several such, the
    // one whose chain holds the most successful commits (the others then did not apply). Memoised by offset.
    const evidenced = (seg: Segment): boolean => okFrom.has(seg.to) || (readOffsets.get(key)?.has(seg.to) ?? false);
    const best = new Map<number, { score: number; next: Segment | null }>();
    const solve = (from: number): number => {
      const known = best.get(from);
      if (known !== undefined) return known.score;
      best.set(from, { score: 0, next: null }); // guards cycles (segments only move forward, but be safe)
      let choice: { score: number; next: Segment | null } = { score: 0, next: null };
      const oks = okFrom.get(from);
      if (oks !== undefined) {
        choice = { score: 1 + solve(oks[0]!.to), next: oks[0]! };
      } else {
        for (const seg of (infoFrom.get(from) ?? []).filter(evidenced)) {
          const score = solve(seg.to);
          if (choice.next === null || score > choice.score) choice = { score, next: seg };
        }
      }
      best.set(from, choice);
      return choice.score;
    };
    solve(0);
    const chain: Segment[] = [];
    const onChain = new Set<Segment>();
    let at = 0;
    for (
      let step = best.get(0)?.next ?? null;
      step !== null && !onChain.has(step);
      step = best.get(step.to)?.next ?? null
    ) {
      chain.push(step);
      onChain.add(step);
      at = step.to;
    }
    for (const seg of ok) {
      if (onChain.has(seg) || seg.to <= seg.from) continue;
      if ((okFrom.get(seg.from) ?? []).length > 1) continue; // reported above
      const overlaps = chain.some((c) => seg.from < c.to && c.from < seg.to);
      found.add(
        overlaps ? 'duplicate' : 'skip',
        `group ${group} partition ${partition}: session ${seg.session} committed [${seg.from}, ${seg.to}), which ${overlaps ? 'overlaps records already committed' : `leaves a gap after the committed chain ending at ${at}`}`,
        [seg.time],
      );
    }
    // Each committed segment was delivered to its session exactly once, in order, with the log's values.
    const log = logs.get(partition);
    let consumed = 0;
    for (const seg of chain) {
      const s = sessions.get(seg.session);
      const delivered = (s?.delivered ?? []).filter(([o]) => o >= seg.from && o < seg.to);
      consumed += seg.to - seg.from;
      let expected = seg.from;
      const counted = new Map<number, number>();
      for (const [offset] of delivered) counted.set(offset, (counted.get(offset) ?? 0) + 1);
      let broken = false;
      for (const [offset, value] of delivered) {
        if (offset !== expected) {
          const type = (counted.get(offset) ?? 0) > 1 ? 'duplicate' : offset < expected ? 'reorder' : 'skip';
          found.add(
            type,
            `group ${group} partition ${partition}: session ${seg.session} committed [${seg.from}, ${seg.to}) but was delivered offset ${offset} where ${expected} was next`,
            [seg.time],
          );
          broken = true;
          break;
        }
        if (log !== undefined && log.values.has(offset) && log.values.get(offset) !== value) {
          found.add(
            'divergent',
            `group ${group} partition ${partition}: session ${seg.session} processed ${value} at offset ${offset}, the log holds ${log.values.get(offset)}`,
            [seg.time],
          );
        }
        expected = offset + 1;
      }
      if (!broken && expected < seg.to) {
        found.add(
          'skip',
          `group ${group} partition ${partition}: session ${seg.session} committed [${seg.from}, ${seg.to}) but was delivered only up to ${expected - 1}: offsets ${expected}..${seg.to - 1} were never processed`,
          [seg.time],
        );
      }
    }
    consumedByGroup[group] = (consumedByGroup[group] ?? 0) + consumed;
    // Every acknowledged append of the partition is inside the committed chain (consumed by the group).
    for (const a of ackedByPartition.get(partition) ?? []) {
      // Only a finished drain proves it: otherwise the group may simply not have got there yet (liveness).
      if (a.offset >= at && !finalReached.has(key)) undrained.add(key);
      else if (a.offset >= at)
        found.add(
          'unconsumed',
          `group ${group}: acknowledged ${a.value} at partition ${partition} offset ${a.offset} was never consumed (the group's committed offset ends at ${at})`,
          [a.time],
        );
    }
  }
  // A group that committed nothing on a partition holding acknowledged records never consumed them.
  for (const group of groups) {
    for (const [partition, list] of ackedByPartition) {
      if (!commits.has(`${group}/${partition}`) && list.length > 0 && !finalReached.has(`${group}/${partition}`))
        undrained.add(`${group}/${partition}`);
      else if (!commits.has(`${group}/${partition}`) && list.length > 0)
        found.add(
          'unconsumed',
          `group ${group} committed nothing on partition ${partition}, which holds ${list.length} acknowledged record(s)`,
          [list[0]!.time],
        );
    }
  }
  const okCommits = [...commits.values()].reduce((n, c) => n + c.ok.length, 0);
  const infoCommits = [...commits.values()].reduce((n, c) => n + c.info.length, 0);
  return {
    name,
    valid: found.list.length > 0 ? false : undrained.size > 0 ? 'unknown' : true,
    anomalies: found.list,
    stats: {
      groups: groups.size,
      ...(undrained.size > 0 ? { undrained: [...undrained].sort().join(' ') } : {}),
      sessions: sessions.size,
      crashes,
      polls: pollsOk,
      commits_ok: okCommits,
      commits_unknown: infoCommits,
      commit_conflicts: conflicts,
      ...Object.fromEntries(Object.entries(consumedByGroup).map(([g, n]) => [`consumed_${g}`, n])),
      ...found.counts,
    },
  };
}

export function checkLogHistory(events: readonly HistoryEvent[]): CheckResult[] {
  const ops = pairOps(events);
  return [checkAckedPresent(events, ops), checkLogIntegrity(events, ops), checkConsumerGroups(events, ops)];
}
