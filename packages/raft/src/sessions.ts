/**
 * Client sessions inside the replicated state (Raft dissertation, section 6.3): every command carries a client
 * id and a sequence number; the state machine remembers the result of each applied (client, seq) so a retried
 * command returns the first result instead of being applied twice.
 *
 * Sessions are registered through the log (the client id is derived from the register entry's index, so every
 * member derives the same id) and expire after `sessionTimeoutMs` without a command, measured on leader-stamped
 * entry time: expiry is a pure function of the log, identical on every member.
 */
import { Packr } from 'msgpackr';
import type { ApplyContext, StateMachine } from './types.js';

export type SessionRequest<C> =
  /** `nonce` lets the proposer recognise its own registration when it is applied. */
  | { t: 'register'; nonce?: string }
  | { t: 'command'; client: string; seq: number; ack: number; command: C }
  /** A command outside any session: applied every time it is committed (no deduplication). */
  | { t: 'raw'; command: C };

export type SessionResult<R> =
  | { ok: true; client: string }
  | { ok: true; result: R; duplicate: boolean }
  | { ok: false; error: 'unknown_session' | 'stale_sequence' };

export interface SessionOptions {
  /** A session with no command for this long (entry time) is expired. Default 10 minutes. */
  sessionTimeoutMs?: number;
  /** Most sessions kept; registering beyond this expires the least recently active one. Default 100,000. */
  maxSessions?: number;
  /** Most cached responses per session (seqs above `ack`); beyond it the oldest is dropped and a retry of it gets stale_sequence (never a second application). Default 8,192. */
  maxCachedPerSession?: number;
}

interface Session<R> {
  lastActive: number;
  /** Every seq <= ack has been acknowledged by the client: its result is gone and it must not be re-applied. */
  ack: number;
  /** Results of applied seqs above ack, in case the client retries them. */
  results: Map<number, R>;
}

interface SessionsSnapshot {
  inner: Uint8Array;
  sessions: Array<[string, number, number, Array<[number, unknown]>]>;
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export function encodeRequest<C>(request: SessionRequest<C>): Uint8Array {
  return packr.pack(request);
}

export function decodeRequest<C>(data: Uint8Array): SessionRequest<C> {
  return packr.unpack(data) as SessionRequest<C>;
}

/** Wraps a state machine so that commands apply exactly once per (client, seq). */
export class SessionStateMachine<C, R> implements StateMachine<Uint8Array, SessionResult<R>> {
  private readonly timeoutMs: number;
  private readonly maxSessions: number;
  private readonly maxCached: number;
  /** Insertion order is activity order (re-inserted on each command), so expiry scans from the front. */
  private sessions = new Map<string, Session<R>>();

  constructor(
    readonly inner: StateMachine<C, R>,
    options: SessionOptions = {},
  ) {
    this.timeoutMs = options.sessionTimeoutMs ?? 10 * 60_000;
    this.maxSessions = options.maxSessions ?? 100_000;
    this.maxCached = options.maxCachedPerSession ?? 8_192;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  apply(data: Uint8Array, context: ApplyContext): SessionResult<R> {
    return this.applyRequest(decodeRequest<C>(data), context);
  }

  /** Apply an already decoded request (the driver decodes once to match replies to waiting proposers). */
  applyRequest(request: SessionRequest<C>, context: ApplyContext): SessionResult<R> {
    this.expire(context.time);
    switch (request.t) {
      case 'register': {
        const client = `c${context.index}`;
        while (this.sessions.size >= this.maxSessions) this.dropOldest();
        this.sessions.set(client, { lastActive: context.time, ack: 0, results: new Map() });
        return { ok: true, client };
      }
      case 'raw':
        return { ok: true, result: this.inner.apply(request.command, context), duplicate: false };
      case 'command':
        return this.applyInSession(request, context);
    }
  }

  private applyInSession(
    request: { client: string; seq: number; ack: number; command: C },
    context: ApplyContext,
  ): SessionResult<R> {
    const session = this.sessions.get(request.client);
    if (session === undefined) return { ok: false, error: 'unknown_session' };
    this.touch(request.client, session, context.time);
    if (request.ack > session.ack) {
      // Results are cached in (nearly) ascending seq order: trim from the front. A straggler above a gap is
      // dropped later, and maxCachedPerSession bounds the table either way.
      for (const seq of session.results.keys()) {
        if (seq > request.ack) break;
        session.results.delete(seq);
      }
      session.ack = request.ack;
    }
    const cached = session.results.get(request.seq);
    if (cached !== undefined) return { ok: true, result: cached, duplicate: true };
    // At or below ack the client said it has the answer; anything it sends there is a stale duplicate.
    if (request.seq <= session.ack) return { ok: false, error: 'stale_sequence' };
    const result = this.inner.apply(request.command, context);
    session.results.set(request.seq, result);
    if (session.results.size > this.maxCached) {
      const oldest = session.results.keys().next().value as number;
      session.results.delete(oldest);
      session.ack = Math.max(session.ack, oldest);
    }
    return { ok: true, result, duplicate: false };
  }

  private touch(client: string, session: Session<R>, time: number): void {
    // Entry time never decreases, so a session already stamped with it sits among the newest: order holds.
    if (session.lastActive >= time) return;
    session.lastActive = time;
    this.sessions.delete(client);
    this.sessions.set(client, session);
  }

  private expire(now: number): void {
    for (const [client, session] of this.sessions) {
      if (session.lastActive + this.timeoutMs > now) break;
      this.sessions.delete(client);
    }
  }

  private dropOldest(): void {
    const oldest = this.sessions.keys().next().value;
    if (oldest !== undefined) this.sessions.delete(oldest);
  }

  snapshot(): Uint8Array {
    const state: SessionsSnapshot = {
      inner: this.inner.snapshot(),
      sessions: [...this.sessions].map(([client, s]) => [client, s.lastActive, s.ack, [...s.results]]),
    };
    return packr.pack(state);
  }

  restore(data: Uint8Array): void {
    const state = packr.unpack(data) as SessionsSnapshot;
    this.inner.restore(new Uint8Array(state.inner));
    this.sessions = new Map(
      state.sessions.map(([client, lastActive, ack, results]) => [
        client,
        { lastActive, ack, results: new Map(results as Array<[number, R]>) },
      ]),
    );
  }
}
