/**
 * How a member's answers over time become what the page shows. Pure (the caller passes the clock), so the rules
 * are tested without processes: under load a member answers late or misses a poll now and then, and that is not the
 * same as being gone.
 *
 * - answered within SLOW_MS: its role (leader, follower...);
 * - answered later than SLOW_MS, or missed fewer than DOWN_AFTER_MISSES polls in a row (or for less than
 *   DOWN_AFTER_MS): `slow`, with its last known role and the latency of its last answer;
 * - missed DOWN_AFTER_MISSES polls in a row spanning at least DOWN_AFTER_MS: `down` (its pid still shown when the
 *   process runs). A process that is gone is `down` at once; that is the caller's to say (it reads /proc).
 */
import type { MemberState } from './types.js';

/** An answer slower than this is shown as slow (a healthy member answers its status in a few ms, 15-65 ms under load). */
export const SLOW_MS = 500;
/** The deadline of one probe: past it the probe is a miss. Long enough that a busy member still answers. */
export const PROBE_TIMEOUT_MS = 2_000;
export const DOWN_AFTER_MISSES = 3;
export const DOWN_AFTER_MS = 5_000;

export type Role = 'leader' | 'follower' | 'candidate' | 'learner';

export interface HealthMemory {
  /** Polls missed in a row (no status answer within PROBE_TIMEOUT_MS). */
  misses: number;
  /** When the first of those misses happened. */
  firstMissAt: number | null;
  lastAnswerAt: number | null;
  lastRole: Role | null;
  lastLatencyMs: number | null;
}

export function newHealth(): HealthMemory {
  return { misses: 0, firstMissAt: null, lastAnswerAt: null, lastRole: null, lastLatencyMs: null };
}

interface Judgement {
  state: MemberState;
  /** The role it answered with last (kept while it is slow). */
  role: Role | null;
  latencyMs: number | null;
  misses: number;
}

/** One poll of a running, not stopped, process: `answer` is its status's role and round trip, or null for a miss. */
export function judge(h: HealthMemory, answer: { role: Role; latencyMs: number } | null, now: number): Judgement {
  if (answer !== null) {
    h.misses = 0;
    h.firstMissAt = null;
    h.lastAnswerAt = now;
    h.lastRole = answer.role;
    h.lastLatencyMs = answer.latencyMs;
    return {
      state: answer.latencyMs >= SLOW_MS ? 'slow' : answer.role,
      role: answer.role,
      latencyMs: answer.latencyMs,
      misses: 0,
    };
  }
  h.misses++;
  h.firstMissAt ??= now;
  const down = h.misses >= DOWN_AFTER_MISSES && now - h.firstMissAt >= DOWN_AFTER_MS - PROBE_TIMEOUT_MS;
  return { state: down ? 'down' : 'slow', role: h.lastRole, latencyMs: null, misses: h.misses };
}
