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

/** What a command entry holds: a session registration, a command in a session, or a command outside any. */
export type SessionRequest<C> =
  /** `nonce` lets the proposer recognise its own registration when it is applied. */
  | { t: 'register'; nonce?: string }
  | { t: 'command'; client: string; seq: number; ack: number; command: C }
  /** A command outside any session: applied every time it is committed (no deduplication). */
  | { t: 'raw'; command: C };

/** The outcome of applying a {@link SessionRequest}, as the proposer receives it. */
export type SessionResult<R> =
  | { ok: true; client: string }
  | { ok: true; result: R; duplicate: boolean }
  | { ok: false; error: 'unknown_session' | 'stale_sequence' }
  /**
   * The state machine threw while applying the command (`message`: the error's name and message), or the entry was
   * not a request at all. The same on every member: the entry counts as applied and the group goes on.
   */
  | { ok: false; error: 'apply_failed' | 'malformed_request'; message: string };

/** Limits of the replicated session table (exactly-once bookkeeping). */
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
  /** Seqs above ack whose command threw, with the message, so a retry gets the same failure (never a re-apply). */
  failed: Map<number, string>;
}

interface SessionsSnapshot {
  inner: Uint8Array;
  /** [client, lastActive, ack, results, failures (absent in snapshots from before they were kept)] */
  sessions: Array<[string, number, number, Array<[number, unknown]>, Array<[number, string]>?]>;
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** The bytes of a request, as proposed to the log. */
export function encodeRequest<C>(request: SessionRequest<C>): Uint8Array {
  const packed = packr.pack(request);
  // msgpackr may hand back a view into a larger buffer (it reserves room for worst-case UTF-8): the log would keep
  // that whole buffer alive for every entry, up to several times the entry's size. Keep exactly the bytes.
  return packed.byteLength === packed.buffer.byteLength ? packed : new Uint8Array(packed);
}

/** A request from a command entry's bytes; throws on bytes that are not one. */
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

  /** How long a session lives without a command (entry time). */
  get sessionTimeoutMs(): number {
    return this.timeoutMs;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Apply one command entry's bytes: register, deduplicate, apply the inner command, record the outcome. */
  apply(data: Uint8Array, context: ApplyContext): SessionResult<R> {
    return this.applyRequest(decodeRequest<C>(data), context);
  }

  /** Apply an already decoded request (the driver decodes once to match replies to waiting proposers). */
  applyRequest(request: SessionRequest<C>, context: ApplyContext): SessionResult<R> {
    this.expire(context.time);
    const malformed = requestProblem(request);
    if (malformed !== null) return { ok: false, error: 'malformed_request', message: malformed };
    switch (request.t) {
      case 'register': {
        const client = `c${context.index}`;
        while (this.sessions.size >= this.maxSessions) this.dropOldest();
        this.sessions.set(client, { lastActive: context.time, ack: 0, results: new Map(), failed: new Map() });
        return { ok: true, client };
      }
      case 'raw': {
        const outcome = this.applyInner(request.command, context);
        return 'failed' in outcome
          ? { ok: false, error: 'apply_failed', message: outcome.failed }
          : { ok: true, result: outcome.result, duplicate: false };
      }
      case 'command':
        return this.applyInSession(request, context);
    }
  }

  /**
   * The inner machine's apply, with a throw turned into a failure: every member throws on the same command (apply
   * is deterministic), so every member records the same failure and the group goes on instead of halting on it.
   */
  private applyInner(command: C, context: ApplyContext): { result: R } | { failed: string } {
    try {
      return { result: this.inner.apply(command, context) };
    } catch (error) {
      const e = error instanceof Error ? error : null;
      return { failed: e !== null ? `${e.name}: ${e.message}` : `thrown: ${String(error)}` };
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
      for (const seq of session.failed.keys()) if (seq <= request.ack) session.failed.delete(seq);
      session.ack = request.ack;
    }
    const cached = session.results.get(request.seq);
    if (cached !== undefined) return { ok: true, result: cached, duplicate: true };
    const failure = session.failed.get(request.seq);
    if (failure !== undefined) return { ok: false, error: 'apply_failed', message: failure };
    // At or below ack the client said it has the answer; anything it sends there is a stale duplicate.
    if (request.seq <= session.ack) return { ok: false, error: 'stale_sequence' };
    const outcome = this.applyInner(request.command, context);
    if ('failed' in outcome) {
      session.failed.set(request.seq, outcome.failed);
      if (session.failed.size > this.maxCached) session.failed.delete(session.failed.keys().next().value as number);
      return { ok: false, error: 'apply_failed', message: outcome.failed };
    }
    const result = outcome.result;
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

  /** The inner machine's snapshot and the session table together (an inner machine that gives bytes). */
  snapshot(): Uint8Array {
    const inner = this.inner.snapshot();
    if (!(inner instanceof Uint8Array))
      throw new TypeError('the state machine streams its snapshot: use snapshotAsync()');
    return this.pack(inner);
  }

  /** Whether the inner machine can be snapshotted while commands apply (StateMachine.detachedSnapshot). */
  get detaches(): boolean {
    return this.inner.detachedSnapshot !== undefined;
  }

  /**
   * A snapshot as of this call, encoded while later commands apply: the session table is copied now and the inner
   * machine takes its own view now (detachedSnapshot); the returned function reads the chunks and packs both, in
   * {@link snapshot}'s format.
   */
  beginSnapshot(): () => Promise<Uint8Array> {
    const detached = this.inner.detachedSnapshot;
    if (detached === undefined) throw new TypeError('the state machine has no detachedSnapshot');
    const chunks = detached.call(this.inner);
    const sessions = this.sessionEntries();
    return async () => {
      const parts: Uint8Array[] = [];
      for await (const chunk of chunks) parts.push(chunk);
      return packr.pack({ inner: Buffer.concat(parts), sessions } satisfies SessionsSnapshot);
    };
  }

  /** The same as {@link snapshot}, for any inner machine: chunks are read until the last one (apply waits). */
  async snapshotAsync(): Promise<Uint8Array> {
    const inner = this.inner.snapshot();
    if (inner instanceof Uint8Array) return this.pack(inner);
    const chunks: Uint8Array[] = [];
    for await (const chunk of inner) chunks.push(chunk);
    return this.pack(Buffer.concat(chunks));
  }

  private pack(inner: Uint8Array): Uint8Array {
    const state: SessionsSnapshot = { inner, sessions: this.sessionEntries() };
    return packr.pack(state);
  }

  /** The session table as the snapshot holds it: new arrays throughout, so later commands do not change it. */
  private sessionEntries(): SessionsSnapshot['sessions'] {
    return [...this.sessions].map(([client, s]) => [client, s.lastActive, s.ack, [...s.results], [...s.failed]]);
  }

  /** Restore both from {@link snapshot}'s bytes (an inner machine with `restoreChunks` gets them as chunks). */
  async restoreAsync(data: Uint8Array): Promise<void> {
    const state = packr.unpack(data) as SessionsSnapshot;
    const inner = state.inner;
    const restoreChunks = this.inner.restoreChunks;
    if (restoreChunks === undefined) this.inner.restore(new Uint8Array(inner));
    else await restoreChunks.call(this.inner, chunksOf(inner, RESTORE_CHUNK_BYTES));
    this.restoreSessions(state);
  }

  /** Restore both from {@link snapshot}'s bytes. */
  restore(data: Uint8Array): void {
    const state = packr.unpack(data) as SessionsSnapshot;
    this.inner.restore(new Uint8Array(state.inner));
    this.restoreSessions(state);
  }

  private restoreSessions(state: SessionsSnapshot): void {
    this.sessions = new Map(
      state.sessions.map(([client, lastActive, ack, results, failed]) => [
        client,
        { lastActive, ack, results: new Map(results as Array<[number, R]>), failed: new Map(failed ?? []) },
      ]),
    );
  }
}

/** Chunks handed to `restoreChunks`: views of the snapshot, no copies. */
const RESTORE_CHUNK_BYTES = 1 << 20;

async function* chunksOf(data: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < data.byteLength; at += size) yield data.subarray(at, Math.min(at + size, data.byteLength));
}

/** Why a decoded entry is not a session request (any bytes can reach the log), or null when it is one. */
function requestProblem(request: unknown): string | null {
  if (typeof request !== 'object' || request === null) return 'the entry is not a request object';
  const r = request as Record<string, unknown>;
  switch (r.t) {
    case 'register':
      return r.nonce === undefined || typeof r.nonce === 'string' ? null : 'register: nonce must be a string';
    case 'raw':
      return null;
    case 'command':
      if (typeof r.client !== 'string') return 'command: client must be a string';
      if (!Number.isSafeInteger(r.seq) || (r.seq as number) < 1) return 'command: seq must be a positive integer';
      if (!Number.isSafeInteger(r.ack) || (r.ack as number) < 0) return 'command: ack must be a non-negative integer';
      return null;
    default:
      return `unknown request type ${typeof r.t === 'string' ? JSON.stringify(r.t.slice(0, 40)) : typeof r.t}`;
  }
}
