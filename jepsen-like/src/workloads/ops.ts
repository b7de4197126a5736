/**
 * A history's client operations as pairs (invocation and completion), for checks that reason about whole
 * operations rather than events, and a few figures helpers. Nemesis events are left out; an invocation without a
 * completion (a run cut short) is an operation of type `open`.
 */
import type { HistoryEvent } from '../history.js';

export interface Op {
  process: number;
  f: string;
  key?: string;
  /** The invocation's value. */
  input: unknown;
  type: 'ok' | 'fail' | 'info' | 'open';
  /** The completion's value. */
  value: unknown;
  error?: string;
  /** Invocation and completion times (ns); `complete` is Infinity for an open operation. */
  invoke: number;
  complete: number;
}

export function pairOps(events: readonly HistoryEvent[]): Op[] {
  const open = new Map<number, Op>();
  const out: Op[] = [];
  for (const e of events) {
    if (e.process === 'nemesis') continue;
    if (e.type === 'invoke') {
      const op: Op = {
        process: e.process,
        f: e.f,
        ...(e.key !== undefined ? { key: e.key } : {}),
        input: e.value,
        type: 'open',
        value: undefined,
        invoke: e.time,
        complete: Number.POSITIVE_INFINITY,
      };
      open.set(e.process, op);
      out.push(op);
      continue;
    }
    const op = open.get(e.process);
    if (op === undefined) continue;
    open.delete(e.process);
    op.type = e.type;
    op.value = e.value;
    if (e.error !== undefined) op.error = e.error;
    op.complete = e.time;
  }
  return out;
}

/** The time of the final heal (the nemesis's `heal` event), else of the first final operation, else null. */
export function healTime(events: readonly HistoryEvent[], finalPrefix = 'final'): number | null {
  let heal: number | null = null;
  for (const e of events) if (e.process === 'nemesis' && e.f === 'heal') heal = e.time;
  if (heal !== null) return heal;
  const first = events.find((e) => e.process !== 'nemesis' && e.f.startsWith(finalPrefix));
  return first?.time ?? null;
}

/** p50, p99 and max of a list of figures (ms), rounded; zeros when empty. */
export function quantiles(xs: readonly number[]): { p50: number; p99: number; max: number } {
  if (xs.length === 0) return { p50: 0, p99: 0, max: 0 };
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number): number => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]!);
  return { p50: at(0.5), p99: at(0.99), max: Math.round(s[s.length - 1]!) };
}
