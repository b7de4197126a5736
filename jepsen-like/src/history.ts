/**
 * The history of a run: JSON lines, one event each, Jepsen's shape:
 *
 *     {"process": 3, "type": "invoke", "f": "cas", "key": "k2", "value": [1, 4], "time": 1234567}
 *     {"process": 3, "type": "fail", "f": "cas", "key": "k2", "value": [1, 4], "time": 2345678, "error": "cas_mismatch"}
 *     {"process": "nemesis", "type": "info", "f": "start-partition", "value": {...}, "time": 3456789}
 *
 * `time` is nanoseconds since the run started (one monotonic clock: the harness's). `invoke` opens an operation;
 * `ok` (it happened, with this value), `fail` (it definitely did not happen) or `info` (unknown: it may or may not
 * have happened; the process is then retired, as in Jepsen) closes it. Optional extras: `error` (why it failed or
 * is unknown) and `node` (the member the client talked to). Nemesis events have process "nemesis" and type "info".
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { parseJepsenEdnHistory, parseJepsenUtilLog, type GenericEvent } from '@raftkit/linearizability';

type EventType = 'invoke' | 'ok' | 'fail' | 'info';

export interface HistoryEvent {
  process: number | 'nemesis';
  type: EventType;
  f: string;
  key?: string;
  value?: unknown;
  time: number;
  error?: string;
  node?: string;
}

/** Appends events to DIR/history.jsonl as they happen (synchronously: a crash loses nothing written) and keeps them. */
export class HistoryWriter {
  readonly events: HistoryEvent[] = [];
  private fd: number | null;
  private readonly origin: bigint;

  constructor(path: string | null, origin: bigint = process.hrtime.bigint()) {
    this.fd = path === null ? null : openSync(path, 'w');
    this.origin = origin;
  }

  /** Nanoseconds since the run started. */
  now(): number {
    return Number(process.hrtime.bigint() - this.origin);
  }

  append(event: Omit<HistoryEvent, 'time'> & { time?: number }): HistoryEvent {
    const full = { ...event, time: event.time ?? this.now() } as HistoryEvent;
    this.events.push(full);
    if (this.fd !== null) writeSync(this.fd, serializeEvent(full) + '\n');
    return full;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/** One event as one JSON line, keys in the documented order. */
export function serializeEvent(event: HistoryEvent): string {
  const ordered: Record<string, unknown> = { process: event.process, type: event.type, f: event.f };
  if (event.key !== undefined) ordered.key = event.key;
  if (event.value !== undefined) ordered.value = event.value;
  ordered.time = event.time;
  if (event.error !== undefined) ordered.error = event.error;
  if (event.node !== undefined) ordered.node = event.node;
  return JSON.stringify(ordered);
}

export class HistoryFormatError extends Error {
  override name = 'HistoryFormatError';
}

/** Parses our JSON-lines format, validating each event. */
export function parseHistoryJsonl(text: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new HistoryFormatError(`line ${index + 1}: not JSON (${(e as Error).message})`);
    }
    events.push(validateEvent(value, index + 1));
  });
  return events;
}

function validateEvent(value: unknown, line: number): HistoryEvent {
  const fail = (why: string): never => {
    throw new HistoryFormatError(`line ${line}: ${why}`);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail('not an object');
  const e = value as Record<string, unknown>;
  if (!(Number.isInteger(e.process) || e.process === 'nemesis')) fail('process must be an integer or "nemesis"');
  if (!['invoke', 'ok', 'fail', 'info'].includes(e.type as string)) fail('type must be invoke, ok, fail or info');
  if (typeof e.f !== 'string') fail('f must be a string');
  if (e.key !== undefined && typeof e.key !== 'string') fail('key must be a string');
  if (typeof e.time !== 'number' || !Number.isFinite(e.time)) fail('time must be a number (nanoseconds)');
  if (e.error !== undefined && typeof e.error !== 'string') fail('error must be a string');
  return e as unknown as HistoryEvent;
}

type HistoryFormat = 'jsonl' | 'jepsen-edn' | 'jepsen-log';

/**
 * Reads a history in any format we know, telling which: our JSON lines; Jepsen's EDN (one map per line, as in
 * history.edn and Porcupine's kv logs); Jepsen's `INFO jepsen.util - P :type :f value` log lines (as in
 * Porcupine's etcd logs).
 */
export function parseAnyHistory(text: string): { format: HistoryFormat; events: GenericEvent[] } {
  const first =
    text
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? '';
  if (first.startsWith('{:')) return { format: 'jepsen-edn', events: parseJepsenEdnHistory(text) };
  if (/^INFO\s+jepsen\.util/.test(first)) return { format: 'jepsen-log', events: parseJepsenUtilLog(text) };
  if (first.startsWith('{') || first === '')
    return { format: 'jsonl', events: parseHistoryJsonl(text) as GenericEvent[] };
  throw new HistoryFormatError(`unrecognised history format (first line: ${first.slice(0, 80)})`);
}

export interface OpCounts {
  total: number;
  ok: number;
  fail: number;
  info: number;
  /** Invocations with no completion (the run ended first). */
  open: number;
  byF: Record<string, { ok: number; fail: number; info: number }>;
}

/** Counts client operations by outcome and by function. */
export function countOps(events: readonly { process: unknown; type: string; f: string }[]): OpCounts {
  const counts: OpCounts = { total: 0, ok: 0, fail: 0, info: 0, open: 0, byF: {} };
  let invoked = 0;
  for (const e of events) {
    if (e.process === 'nemesis' || typeof e.process !== 'number') continue;
    if (e.type === 'invoke') {
      invoked++;
      continue;
    }
    const t = e.type as 'ok' | 'fail' | 'info';
    counts[t]++;
    const byF = (counts.byF[e.f] ??= { ok: 0, fail: 0, info: 0 });
    byF[t]++;
  }
  counts.total = invoked;
  counts.open = invoked - counts.ok - counts.fail - counts.info;
  return counts;
}
