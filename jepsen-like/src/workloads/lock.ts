/**
 * lock: sessions acquiring named locks of the lock service, writing token-stamped values to a protected
 * resource while they believe they hold the lock, and releasing.
 *
 * Each client opens a session (heartbeats in the background, never recorded), acquires one of a few locks
 * without waiting, and while it believes it holds it writes a few values stamped with its fencing token to the
 * protected resource, then releases. Like a client stalled by a long pause, it keeps writing even if its
 * heartbeats fail: the lock may have expired and been granted to someone else meanwhile, and then the
 * resource must refuse the stale token. The resource is simulated in the harness ("storage" that keeps the
 * highest token seen per lock and refuses lower ones); every write it accepts or refuses is in the history.
 *
 * History (key = the lock name):
 *   open-session        value = session id (no key: not an operation of the lock model)
 *   acquire             invoke value {session}; ok value {session, granted, token}; fail error unknown_session
 *   write               the resource: invoke value {session, token, data}; ok (accepted) or fail error "fenced"
 *   release             invoke value {session, token}; ok; fail with error stale_token / not_holder / unknown_session
 *   read                final reads: ok value {holder, token}
 *
 * Checks: every (lock, token) granted to one session only; tokens grow in real-time grant order; the resource
 * accepted no write with a token lower than one it had already accepted, and only tokens really granted to the
 * writing session; acquire/release/read linearizable against the lock model (sessions may expire at any time).
 */
import type { HistoryEvent } from '../history.js';
import { callJson, errorCode, readFailure, writeFailure } from './http.js';
import type { Anomaly, CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface LockOptions {
  locks: number;
  sessionTimeoutMs: number;
  /** Resource writes per grant: 1..maxWrites. */
  maxWrites: number;
  /** Pause between two writes of one holder. */
  writeGapMs: [number, number];
  /**
   * Chance that a holder stalls before a write, as if frozen by a long GC pause: no heartbeats, no writes, for
   * 1.5 to 3 session timeouts; its session may expire and its lock go to someone else meanwhile, and its next
   * write then carries a stale token. This exercises the fencing path in every run, faults or not.
   */
  stallProbability: number;
  /** The resource checks tokens (default). Off: it accepts every write, as an unfenced resource would; the
   * workload "lock-unfenced" uses it to show the fencing check catching stale writes. */
  fenced: boolean;
  /**
   * Chance that a client waits in the service's queue for the queue lock instead of trying a lock without
   * waiting. Waiters still queued when the faults end must all be granted after the heal (check
   * `waiters-granted`). Queue operations are outside the lock model (the model has no queue); their grants go
   * through the token and fencing checks like any other.
   */
  waitProbability: number;
}

export const DEFAULT_LOCK_OPTIONS: LockOptions = {
  locks: 2,
  sessionTimeoutMs: 1_000,
  maxWrites: 8,
  writeGapMs: [100, 600],
  stallProbability: 0.08,
  fenced: true,
  waitProbability: 0.3,
};

/** The lock clients queue for (wait: true). */
const QUEUE_LOCK = 'queue-0';
/** How long a waiter still queued after the heal may wait for its grant before the check fails. */
const GRANT_AFTER_HEAL_MS = 30_000;

/** The protected resource: keeps the highest token it has seen per lock and refuses lower ones. */
export class FencedStorage {
  private readonly highest = new Map<string, number>();
  readonly log: { lock: string; token: number; session: string; accepted: boolean }[] = [];

  constructor(private readonly fenced = true) {}

  write(lock: string, token: number, session: string): boolean {
    const accepted = !this.fenced || token >= (this.highest.get(lock) ?? 0);
    if (accepted) this.highest.set(lock, token);
    this.log.push({ lock, token, session, accepted });
    return accepted;
  }
}

export class LockWorkload implements Workload {
  readonly name: string;
  readonly service = 'lock';
  readonly model = 'lock' as const;
  readonly storage: FencedStorage;
  private writes = 0;

  constructor(private readonly options: LockOptions = DEFAULT_LOCK_OPTIONS) {
    this.name = options.fenced ? 'lock' : 'lock-unfenced';
    this.storage = new FencedStorage(options.fenced);
  }

  describe(): string {
    return `${this.options.fenced ? '' : '(UNFENCED resource) '}sessions (timeout ${this.options.sessionTimeoutMs} ms) acquiring ${this.options.locks} locks without waiting (and queueing for ${QUEUE_LOCK} ${Math.round(this.options.waitProbability * 100)}% of the time), writing 1..${this.options.maxWrites} token-stamped values to a fenced resource (stalling like a GC pause before ${Math.round(this.options.stallProbability * 100)}% of writes), releasing`;
  }

  private lockName(i: number): string {
    return `lock-${i}`;
  }

  createWorker(ctx: WorkerContext): Worker {
    const { rng, token } = ctx;
    const base = ctx.url(ctx.node);
    let session: string | null = null;
    let heartbeat: NodeJS.Timeout | null = null;
    let holding: { lock: string; token: number; writesLeft: number } | null = null;
    let stalled = false;
    /** Queued for the queue lock when the run stopped: must be granted after the heal. */
    let queued = false;

    const dropSession = (): void => {
      if (heartbeat !== null) clearInterval(heartbeat);
      heartbeat = null;
      session = null;
    };
    const startHeartbeats = (id: string): void => {
      heartbeat = setInterval(
        () => {
          if (stalled) return;
          void callJson(`${base}/v1/sessions/${id}/heartbeat`, {
            method: 'POST',
            token,
            timeoutMs: Math.floor(this.options.sessionTimeoutMs / 2),
          });
        },
        Math.floor(this.options.sessionTimeoutMs / 3),
      );
      heartbeat.unref();
    };

    const openSession = async (): Promise<void> => {
      const done = await ctx.perform({ f: 'open-session' }, async (): Promise<Completion> => {
        const outcome = await callJson(`${base}/v1/sessions`, {
          method: 'POST',
          token,
          body: { timeout_ms: this.options.sessionTimeoutMs },
          timeoutMs: ctx.opTimeoutMs,
        });
        if (outcome.kind === 'response' && outcome.status === 201)
          return { type: 'ok', value: (outcome.body as { session_id: string }).session_id };
        return writeFailure(outcome);
      });
      if (done.type === 'ok') {
        session = done.value as string;
        startHeartbeats(session);
      } else await ctx.sleep(200);
    };

    const acquire = async (sessionId: string): Promise<void> => {
      const lock = this.lockName(rng.int(0, this.options.locks - 1));
      const done = await ctx.perform(
        { f: 'acquire', key: lock, value: { session: sessionId } },
        async (): Promise<Completion> => {
          const outcome = await callJson(`${base}/v1/locks/${lock}/acquire`, {
            method: 'POST',
            token,
            body: { session_id: sessionId, wait: false },
            timeoutMs: ctx.opTimeoutMs,
          });
          if (outcome.kind === 'response' && outcome.status === 200) {
            const body = outcome.body as { granted: boolean; fencing_token?: number };
            return {
              type: 'ok',
              value: {
                session: sessionId,
                granted: body.granted,
                ...(body.granted ? { token: body.fencing_token } : {}),
              },
            };
          }
          return { ...writeFailure(outcome), value: { session: sessionId } };
        },
      );
      if (done.type === 'ok') {
        const v = done.value as { granted: boolean; token?: number };
        if (v.granted && typeof v.token === 'number')
          holding = { lock, token: v.token, writesLeft: rng.int(1, this.options.maxWrites) };
        else await ctx.sleep(rng.int(20, 200));
      } else if (done.type === 'info' || done.error === 'unknown_session') {
        // Unknown outcome: the process is retired; its session is abandoned (it may hold the lock until it expires).
        dropSession();
      }
    };

    /** Wait for the service to grant the queue lock to `sessionId` (it does so on release or expiry of the holder). */
    const awaitGrant = async (sessionId: string, endOnStop: boolean, boundMs: number): Promise<Completion> => {
      const deadline = Date.now() + boundMs;
      while (Date.now() < deadline) {
        if (endOnStop && ctx.stopping) return { type: 'info', error: 'still-queued', value: { session: sessionId } };
        const lock = await callJson(`${base}/v1/locks/${QUEUE_LOCK}`, {
          method: 'GET',
          token,
          timeoutMs: ctx.opTimeoutMs,
        });
        if (lock.kind === 'response' && lock.status === 200) {
          const body = lock.body as { holder_session: string | null; fencing_token: number; revision: number };
          if (body.holder_session === sessionId)
            return { type: 'ok', value: { session: sessionId, granted: true, token: body.fencing_token } };
          const s = await callJson(`${base}/v1/sessions/${sessionId}`, {
            method: 'GET',
            token,
            timeoutMs: ctx.opTimeoutMs,
          });
          if (s.kind === 'response' && s.status === 404)
            return { type: 'fail', error: 'session_lost', value: { session: sessionId } };
          await callJson(
            `${base}/v1/locks/${QUEUE_LOCK}/watch?session_id=${sessionId}&after_revision=${body.revision}&timeout_ms=1000`,
            { method: 'GET', token, timeoutMs: 3_000 },
          );
        } else {
          await ctx.sleep(200);
        }
      }
      return { type: 'info', error: 'not-granted-in-time', value: { session: sessionId } };
    };

    const waitInQueue = async (sessionId: string): Promise<void> => {
      const done = await ctx.perform(
        { f: 'wait', key: QUEUE_LOCK, value: { session: sessionId } },
        async (): Promise<Completion> => {
          const outcome = await callJson(`${base}/v1/locks/${QUEUE_LOCK}/acquire`, {
            method: 'POST',
            token,
            body: { session_id: sessionId, wait: true },
            timeoutMs: ctx.opTimeoutMs,
          });
          if (outcome.kind === 'response' && outcome.status === 200) {
            const body = outcome.body as { granted: boolean; fencing_token?: number };
            if (body.granted)
              return { type: 'ok', value: { session: sessionId, granted: true, token: body.fencing_token } };
            return awaitGrant(sessionId, true, GRANT_AFTER_HEAL_MS);
          }
          return { ...writeFailure(outcome), value: { session: sessionId } };
        },
      );
      if (done.type === 'ok')
        holding = {
          lock: QUEUE_LOCK,
          token: (done.value as { token: number }).token,
          writesLeft: rng.int(1, this.options.maxWrites),
        };
      else if (done.error === 'still-queued') queued = true;
      else if (done.error === 'session_lost' || done.error === 'unknown_session' || done.type === 'info') dropSession();
    };

    const write = async (h: { lock: string; token: number; writesLeft: number }, sessionId: string): Promise<void> => {
      if (!ctx.stopping && rng.chance(this.options.stallProbability)) {
        stalled = true;
        await ctx.sleep(Math.round(this.options.sessionTimeoutMs * rng.between(1.5, 3)));
        stalled = false;
      }
      const data = ++this.writes;
      const done = await ctx.perform(
        { f: 'write', key: h.lock, value: { session: sessionId, token: h.token, data } },
        async () =>
          this.storage.write(h.lock, h.token, sessionId) ? { type: 'ok' } : { type: 'fail', error: 'fenced' },
      );
      // A refused write tells the client it lost the lock: it stops writing and lets go.
      h.writesLeft = done.type === 'ok' ? h.writesLeft - 1 : 0;
      await ctx.sleep(rng.int(this.options.writeGapMs[0], this.options.writeGapMs[1]));
    };

    const release = async (h: { lock: string; token: number }, sessionId: string): Promise<void> => {
      const f = h.lock === QUEUE_LOCK ? 'queue-release' : 'release';
      const done = await ctx.perform(
        { f, key: h.lock, value: { session: sessionId, token: h.token } },
        async (): Promise<Completion> => {
          const outcome = await callJson(`${base}/v1/locks/${h.lock}/release`, {
            method: 'POST',
            token,
            body: { session_id: sessionId, fencing_token: h.token },
            timeoutMs: ctx.opTimeoutMs,
          });
          if (outcome.kind === 'response' && outcome.status === 200) return { type: 'ok' };
          if (outcome.kind === 'response' && (outcome.status === 409 || outcome.status === 404))
            return { type: 'fail', error: errorCode(outcome.body) ?? `http_${outcome.status}` };
          return writeFailure(outcome);
        },
      );
      if (
        done.type === 'ok' ||
        done.error === 'stale_token' ||
        done.error === 'not_holder' ||
        done.error === 'unknown_session' ||
        done.type === 'info'
      ) {
        holding = null;
        if (done.type === 'info' || done.error === 'unknown_session') dropSession();
      } else await ctx.sleep(100);
    };

    return {
      step: async () => {
        if (holding !== null && session !== null) {
          if (holding.writesLeft > 0) await write(holding, session);
          else await release(holding, session);
          return;
        }
        holding = null;
        if (session === null) {
          await openSession();
          return;
        }
        if (rng.chance(this.options.waitProbability)) await waitInQueue(session);
        else await acquire(session);
      },
      finish: async () => {
        if (queued && session !== null) {
          const sessionId = session;
          const done = await ctx.perform({ f: 'wait-after-heal', key: QUEUE_LOCK, value: { session: sessionId } }, () =>
            awaitGrant(sessionId, false, GRANT_AFTER_HEAL_MS),
          );
          queued = false;
          if (done.type === 'ok')
            holding = { lock: QUEUE_LOCK, token: (done.value as { token: number }).token, writesLeft: 0 };
        }
        for (let attempt = 0; attempt < 5 && holding !== null && session !== null; attempt++)
          await release(holding, session);
        if (session !== null)
          await callJson(`${base}/v1/sessions/${session}`, { method: 'DELETE', token, timeoutMs: ctx.opTimeoutMs });
        dropSession();
      },
      abort: () => dropSession(),
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    let turn = 0;
    for (let i = 0; i < this.options.locks; i++) {
      const lock = this.lockName(i);
      while (Date.now() < ctx.deadline) {
        const node = ctx.nodes[turn++ % ctx.nodes.length]!;
        const done = await ctx.perform({ f: 'read', key: lock }, async (): Promise<Completion> => {
          const outcome = await callJson(`${ctx.url(node)}/v1/locks/${lock}`, {
            method: 'GET',
            token: ctx.token,
            timeoutMs: ctx.opTimeoutMs,
          });
          if (outcome.kind === 'response' && outcome.status === 200) {
            const body = outcome.body as { holder_session: string | null; fencing_token: number };
            return { type: 'ok', value: { holder: body.holder_session, token: body.fencing_token } };
          }
          return readFailure(outcome);
        });
        if (done.type === 'ok') break;
        await ctx.sleep(200);
      }
    }
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkLockHistory(events);
  }
}

interface Op {
  process: number;
  f: string;
  key: string | undefined;
  invokeValue: unknown;
  type: 'ok' | 'fail' | 'info' | 'open';
  value: unknown;
  error: string | undefined;
  call: number;
  ret: number | null;
}

function pairOps(events: readonly HistoryEvent[]): Op[] {
  const open = new Map<number, Op>();
  const ops: Op[] = [];
  for (const e of events) {
    if (typeof e.process !== 'number') continue;
    if (e.type === 'invoke') {
      const op: Op = {
        process: e.process,
        f: e.f,
        key: e.key,
        invokeValue: e.value,
        type: 'open',
        value: undefined,
        error: undefined,
        call: e.time,
        ret: null,
      };
      open.set(e.process, op);
      ops.push(op);
    } else {
      const op = open.get(e.process);
      if (op === undefined) continue;
      open.delete(e.process);
      op.type = e.type;
      op.value = e.value;
      op.error = e.error;
      op.ret = e.time;
    }
  }
  return ops;
}

/** The lock workload's checks beside linearizability (exported for tests). */
export function checkLockHistory(events: readonly HistoryEvent[]): CheckResult[] {
  const ops = pairOps(events);
  const grants = ops
    .filter(
      (o) =>
        (o.f === 'acquire' || o.f === 'wait' || o.f === 'wait-after-heal') &&
        o.type === 'ok' &&
        (o.value as { granted?: boolean }).granted === true,
    )
    .map((o) => ({
      lock: o.key!,
      token: (o.value as { token: number }).token,
      session: (o.value as { session: string }).session,
      call: o.call,
      ret: o.ret!,
    }));

  // 1. No token granted twice.
  const unique: Anomaly[] = [];
  const byToken = new Map<string, typeof grants>();
  for (const g of grants) {
    const k = `${g.lock}#${g.token}`;
    byToken.set(k, [...(byToken.get(k) ?? []), g]);
  }
  for (const [k, gs] of byToken) {
    const sessions = [...new Set(gs.map((g) => g.session))];
    if (sessions.length > 1)
      unique.push({
        check: 'unique-tokens',
        type: 'token-granted-twice',
        description: `${k.replace('#', ' token ')} was granted to ${sessions.length} sessions: ${sessions.join(', ')}`,
        times: gs.map((g) => g.ret),
      });
  }

  // 2. Tokens increase in grant order: a grant that completed before another was invoked has a smaller token.
  const order: Anomaly[] = [];
  const byLock = new Map<string, typeof grants>();
  for (const g of grants) byLock.set(g.lock, [...(byLock.get(g.lock) ?? []), g]);
  for (const [lock, gs] of byLock) {
    const sorted = [...gs].sort((a, b) => a.ret - b.ret);
    // Sweep: the largest token among grants that completed before each grant's invocation.
    for (const g of gs) {
      for (const earlier of sorted) {
        if (earlier.ret >= g.call) break;
        const sameGrant = earlier.session === g.session && earlier.token === g.token;
        if (!sameGrant && earlier.token >= g.token) {
          order.push({
            check: 'token-order',
            type: 'token-not-increasing',
            description: `${lock}: token ${g.token} granted to ${g.session} after token ${earlier.token} had been granted to ${earlier.session}`,
            times: [earlier.ret, g.call],
          });
          break;
        }
      }
    }
  }

  // 3. The resource: writes replayed in order; none accepted below a token already accepted; refusals justified;
  //    every token written was granted to the session writing it.
  const fencing: Anomaly[] = [];
  const highest = new Map<string, number>();
  const granted = new Set(grants.map((g) => `${g.lock}#${g.token}#${g.session}`));
  let accepted = 0;
  let refused = 0;
  const writes = ops
    .filter((o) => o.f === 'write' && (o.type === 'ok' || o.type === 'fail'))
    .sort((a, b) => (a.ret ?? 0) - (b.ret ?? 0));
  for (const w of writes) {
    const { token, session } = w.invokeValue as { token: number; session: string };
    const lock = w.key!;
    const top = highest.get(lock) ?? 0;
    if (w.type === 'ok') {
      accepted++;
      if (token < top)
        fencing.push({
          check: 'fencing',
          type: 'stale-write-accepted',
          description: `${lock}: the resource accepted token ${token} from ${session} after accepting token ${top}`,
          times: [w.call],
        });
      if (!granted.has(`${lock}#${token}#${session}`))
        fencing.push({
          check: 'fencing',
          type: 'ungranted-token',
          description: `${lock}: ${session} wrote with token ${token}, which it was never granted`,
          times: [w.call],
        });
      highest.set(lock, Math.max(top, token));
    } else {
      refused++;
      if (token >= top)
        fencing.push({
          check: 'fencing',
          type: 'write-refused-wrongly',
          description: `${lock}: the resource refused token ${token} although the highest it had seen was ${top}`,
          times: [w.call],
        });
    }
  }
  const releases = ops.filter((o) => o.f === 'release' || o.f === 'queue-release');
  // Every waiter still queued when the faults ended must be granted after the heal (or have lost its session).
  const waits = ops.filter((o) => o.f === 'wait');
  const afterHeal = ops.filter((o) => o.f === 'wait-after-heal');
  const waiters: Anomaly[] = afterHeal
    .filter((o) => o.type !== 'ok' && !(o.type === 'fail' && o.error === 'session_lost'))
    .map((o) => ({
      check: 'waiters-granted',
      type: 'waiter-not-granted',
      description: `${(o.invokeValue as { session: string }).session} waited for ${o.key} and was not granted within ${GRANT_AFTER_HEAL_MS / 1000} s after the heal (${o.error ?? o.type})`,
    }));
  return [
    {
      name: 'waiters-granted',
      valid: waiters.length === 0,
      anomalies: waiters,
      stats: {
        waits: waits.length,
        grantedWhileRunning: waits.filter((o) => o.type === 'ok').length,
        stillQueuedAtHeal: afterHeal.length,
        grantedAfterHeal: afterHeal.filter((o) => o.type === 'ok').length,
        sessionsLost: [...waits, ...afterHeal].filter((o) => o.error === 'session_lost').length,
      },
    },
    { name: 'unique-tokens', valid: unique.length === 0, anomalies: unique, stats: { grants: grants.length } },
    { name: 'token-order', valid: order.length === 0, anomalies: order },
    {
      name: 'fencing',
      valid: fencing.length === 0,
      anomalies: fencing,
      stats: {
        accepted,
        refused,
        releases: releases.length,
        releasesRefused: releases.filter(
          (r) => r.type === 'fail' && (r.error === 'stale_token' || r.error === 'not_holder'),
        ).length,
      },
    },
  ];
}
