/**
 * A counter take as the check engine speaks it (CounterOp) and its answer (CounterResult), and the reading of a wire
 * answer into one. Below both the client and the shard, which both hand out CounterResults, so neither imports the other.
 */
import { remainingOf } from './counters.js';
import type { WireResult } from './protocol.js';

export interface CounterOp {
  /** `{service_id}:{endpoint}:{dimension}:{value}` */
  key: string;
  capacity: number;
  /** Tokens per second. */
  refillRate: number;
  /** Tokens to take (default 1). */
  cost?: number;
  /** 'sync' (default): regions merge this counter; 'budget': this region uses its traffic share of the limits. */
  mode?: 'sync' | 'budget';
}

export interface CounterResult {
  allowed: boolean;
  /** Tokens left after the take (may be fractional, or negative after debits from other regions/instances). */
  tokens: number;
  /** floor(tokens) when allowed, 0 when denied. */
  remaining: number;
  /** When denied: ceil((cost - tokens) / refill_rate * 1000). */
  retryAfterMs?: number;
  /** Milliseconds until the bucket is full again. */
  resetMs: number;
}

export function toResult([allowed, tokens, retryAfterMs, resetMs]: WireResult): CounterResult {
  return allowed === 1
    ? { allowed: true, tokens, remaining: remainingOf(true, tokens), resetMs }
    : { allowed: false, tokens, remaining: 0, retryAfterMs, resetMs };
}
