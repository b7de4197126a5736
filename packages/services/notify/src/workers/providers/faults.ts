/**
 * Provider faults a test or a benchmark orders through a stand-in's admin endpoint: fail the next N requests (each
 * stand-in answers its protocol's transient failure: HTTP 5xx, SMTP 4xx) and/or answer every request `slow_ms`
 * late. Retries, backoff and fallback chains are only testable against a provider that can be made to fail on cue.
 */
import { badRequest, type JsonObject } from '@raftkit/http';

export interface FaultState {
  fail_next: number;
  /** The status the failures answer (HTTP 500-599 for the HTTP stand-ins, SMTP 421-454 for the SMTP one). */
  status: number;
  slow_ms: number;
  /** How many requests were failed on purpose so far. */
  failed: number;
}

export class Faults {
  private state: FaultState;

  constructor(private readonly statusRange: { min: number; max: number; fallback: number }) {
    this.state = { fail_next: 0, status: statusRange.fallback, slow_ms: 0, failed: 0 };
  }

  /** Applies POST /admin/faults {fail_next?, status?, slow_ms?}; 400 for anything out of range. */
  configure(body: JsonObject): FaultState {
    const next = { ...this.state };
    if (body.fail_next !== undefined) next.fail_next = intIn(body.fail_next, 'fail_next', 0, 1_000_000);
    if (body.status !== undefined)
      next.status = intIn(body.status, 'status', this.statusRange.min, this.statusRange.max);
    if (body.slow_ms !== undefined) next.slow_ms = intIn(body.slow_ms, 'slow_ms', 0, 120_000);
    this.state = next;
    return this.view();
  }

  view(): FaultState {
    return { ...this.state };
  }

  /** The status to fail this request with, or null to serve it (consumes one planned failure). */
  takeFailure(): number | null {
    if (this.state.fail_next <= 0) return null;
    this.state.fail_next--;
    this.state.failed++;
    return this.state.status;
  }

  /** Waits `slow_ms` when the stand-in was told to go slow. */
  async delay(): Promise<void> {
    if (this.state.slow_ms > 0) await new Promise((r) => setTimeout(r, this.state.slow_ms));
  }
}

function intIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badRequest('invalid_field', `${field} must be an integer from ${min} to ${max}`, { field });
  }
  return value;
}
