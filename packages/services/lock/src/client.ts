/**
 * A TypeScript client for the lock service: one session per process with background heartbeats, acquire and
 * release, withLock(), a leader-election helper, a lost-lease signal, and a protected-resource helper that
 * enforces fencing tokens on the resource side.
 */
import { ClusterClient, ServiceError, type ClusterClientOptions } from '@raftkit/http';

export { ServiceError as LockServiceError };

export interface LockClientOptions extends ClusterClientOptions {
  /** Session timeout asked of the service. Default 10 s. */
  sessionTimeoutMs?: number;
  /** Heartbeat period. Default a third of the timeout. */
  heartbeatMs?: number;
  /**
   * The holder stops acting this long before its session could have expired, by its own clock, when heartbeats
   * fail. Default a fifth of the timeout (covers clock-rate drift and the time a request takes).
   */
  safetyMarginMs?: number;
}

export interface Grant {
  name: string;
  fencingToken: number;
  /** Aborted when the lease is lost: the holder must stop acting on the lock at once. */
  signal: AbortSignal;
}

interface Session {
  id: string;
  timeoutMs: number;
  /** By our clock: after this the service may have expired the session. */
  validUntil: number;
  lost: AbortController;
}

export class LockClient {
  private readonly http: ClusterClient;
  private readonly timeoutMs: number;
  private readonly heartbeatMs: number;
  private readonly marginMs: number;
  private session: Session | null = null;
  private opening: Promise<Session> | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private leaseTimer: NodeJS.Timeout | null = null;
  private readonly lostListeners = new Set<(sessionId: string) => void>();
  private closed = false;

  constructor(options: LockClientOptions) {
    this.timeoutMs = options.sessionTimeoutMs ?? 10_000;
    this.heartbeatMs = options.heartbeatMs ?? Math.floor(this.timeoutMs / 3);
    this.marginMs = options.safetyMarginMs ?? Math.floor(this.timeoutMs / 5);
    this.http = new ClusterClient({ ...options, timeoutMs: options.timeoutMs ?? this.timeoutMs });
  }

  /** Called when the session's lease is lost (heartbeats failed past timeout minus margin, or it expired). */
  onLeaseLost(listener: (sessionId: string) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /** Whether, by this process's clock, the session is surely still alive at the service. */
  leaseValid(): boolean {
    return this.session !== null && Date.now() < this.session.validUntil;
  }

  /** This process's session, opened on first use. */
  async sessionId(): Promise<string> {
    return (await this.ensureSession()).id;
  }

  /** Acquire without waiting: a Grant, or null when another session holds the lock. */
  async tryAcquire(name: string): Promise<Grant | null> {
    const session = await this.ensureSession();
    const answer = (await this.http.call('POST', `/v1/locks/${enc(name)}/acquire`, {
      session_id: session.id,
      wait: false,
    })) as AcquireAnswer;
    return answer.granted ? { name, fencingToken: answer.fencing_token!, signal: session.lost.signal } : null;
  }

  /** Acquire, waiting in the service's queue; resolves when granted. Rejects if the lease is lost meanwhile. */
  async acquire(name: string): Promise<Grant> {
    const session = await this.ensureSession();
    const answer = (await this.http.call('POST', `/v1/locks/${enc(name)}/acquire`, {
      session_id: session.id,
      wait: true,
    })) as AcquireAnswer;
    if (answer.granted) return { name, fencingToken: answer.fencing_token!, signal: session.lost.signal };
    // Queued: the service grants us on release; a watch scoped to our session wakes only us.
    for (;;) {
      if (session.lost.signal.aborted) throw new Error(`lease lost while waiting for ${name}`);
      const lock = await this.getLock(name);
      if (lock.holder_session === session.id)
        return { name, fencingToken: lock.fencing_token, signal: session.lost.signal };
      await this.watch(name, { afterRevision: lock.revision, session: session.id });
    }
  }

  /** The lock's state, linearizable. */
  async getLock(name: string): Promise<LockBody> {
    return (await this.http.call('GET', `/v1/locks/${enc(name)}`)) as LockBody;
  }

  /** Long-poll for the next change of the lock after `afterRevision` (only changes for `session`, if given). */
  async watch(name: string, options: { afterRevision: number; session?: string; timeoutMs?: number }): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    const session = options.session === undefined ? '' : `&session_id=${options.session}`;
    await this.http.call(
      'GET',
      `/v1/locks/${enc(name)}/watch?after_revision=${options.afterRevision}&timeout_ms=${timeoutMs}${session}`,
      undefined,
      {},
      timeoutMs + 5_000,
    );
  }

  async release(grant: Grant): Promise<void> {
    const session = await this.ensureSession();
    await this.http.call('POST', `/v1/locks/${enc(grant.name)}/release`, {
      session_id: session.id,
      fencing_token: grant.fencingToken,
    });
  }

  /** Run `fn` holding `name`; `fn` gets the fencing token to stamp on every write, and a signal for lease loss. */
  async withLock<T>(name: string, fn: (fencingToken: number, signal: AbortSignal) => Promise<T>): Promise<T> {
    const grant = await this.acquire(name);
    try {
      return await fn(grant.fencingToken, grant.signal);
    } finally {
      if (!grant.signal.aborted) await this.release(grant).catch(() => undefined);
    }
  }

  /** Close the session: every lock it holds is released and it leaves every queue. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopTimers();
    const session = this.session;
    this.session = null;
    if (session !== null) await this.http.call('DELETE', `/v1/sessions/${session.id}`).catch(() => undefined);
    await this.http.close();
  }

  private async ensureSession(): Promise<Session> {
    if (this.closed) throw new Error('the client is closed');
    if (this.session !== null && !this.session.lost.signal.aborted) return this.session;
    this.opening ??= this.open().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async open(): Promise<Session> {
    const started = Date.now();
    const answer = (await this.http.call('POST', '/v1/sessions', { timeout_ms: this.timeoutMs })) as {
      session_id: string;
      timeout_ms: number;
    };
    const session: Session = {
      id: answer.session_id,
      timeoutMs: answer.timeout_ms,
      validUntil: started + answer.timeout_ms - this.marginMs,
      lost: new AbortController(),
    };
    this.session = session;
    this.stopTimers();
    this.heartbeat = setInterval(() => void this.beat(session), this.heartbeatMs);
    this.heartbeat.unref();
    this.armLeaseTimer(session);
    return session;
  }

  private async beat(session: Session): Promise<void> {
    const sent = Date.now();
    try {
      await this.http.call('POST', `/v1/sessions/${session.id}/heartbeat`, undefined, {}, this.heartbeatMs);
      // The deadline was pushed out no earlier than when we sent the heartbeat.
      session.validUntil = sent + session.timeoutMs - this.marginMs;
      this.armLeaseTimer(session);
    } catch (e) {
      if (e instanceof ServiceError && (e.status === 404 || e.status === 403)) this.loseLease(session);
    }
  }

  private armLeaseTimer(session: Session): void {
    if (this.leaseTimer !== null) clearTimeout(this.leaseTimer);
    this.leaseTimer = setTimeout(() => this.loseLease(session), Math.max(0, session.validUntil - Date.now()));
    this.leaseTimer.unref();
  }

  private loseLease(session: Session): void {
    if (session.lost.signal.aborted) return;
    session.lost.abort(new Error('lock session lease lost'));
    if (this.session === session) {
      this.session = null;
      this.stopTimers();
    }
    for (const listener of this.lostListeners) listener(session.id);
  }

  private stopTimers(): void {
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    if (this.leaseTimer !== null) clearTimeout(this.leaseTimer);
    this.heartbeat = null;
    this.leaseTimer = null;
  }
}

/**
 * Leader election on one well-known lock name: the winner leads, the others wait in the queue; the fencing token
 * is the leadership epoch.
 */
export class LeaderElection {
  private grant: Grant | null = null;

  constructor(
    private readonly client: LockClient,
    readonly name: string,
  ) {}

  /** Wait until this process leads; resolves with the epoch. `grant.signal` aborts when leadership is lost. */
  async campaign(): Promise<Grant> {
    this.grant = await this.client.acquire(this.name);
    return this.grant;
  }

  /** The current leader's session and epoch, and a call on every change until the returned stop() is called. */
  observe(onChange: (leader: { session: string | null; epoch: number }) => void): () => void {
    let stopped = false;
    void (async () => {
      let revision = -1;
      while (!stopped) {
        try {
          const lock = await this.client.getLock(this.name);
          if (lock.revision !== revision) {
            revision = lock.revision;
            onChange({ session: lock.holder_session, epoch: lock.fencing_token });
          }
          await this.client.watch(this.name, { afterRevision: revision });
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    })();
    return () => {
      stopped = true;
    };
  }

  async resign(): Promise<void> {
    if (this.grant !== null) await this.client.release(this.grant);
    this.grant = null;
  }
}

/**
 * The resource side of fencing: keeps the highest token seen per resource and rejects writes with a lower one.
 * A holder paused past its lease (and replaced) is stopped here, whatever it believes.
 */
export class ProtectedResource<V> {
  private readonly highest = new Map<string, number>();
  private readonly values = new Map<string, V>();

  /** Apply the write if `token` is at least the highest seen for `resource`; returns whether it was accepted. */
  write(resource: string, token: number, value: V): boolean {
    const seen = this.highest.get(resource) ?? 0;
    if (token < seen) return false;
    this.highest.set(resource, token);
    this.values.set(resource, value);
    return true;
  }

  read(resource: string): V | undefined {
    return this.values.get(resource);
  }

  highestToken(resource: string): number {
    return this.highest.get(resource) ?? 0;
  }
}

interface AcquireAnswer {
  granted: boolean;
  fencing_token?: number;
  position?: number;
}

export interface LockBody {
  name: string;
  holder_session: string | null;
  fencing_token: number;
  queue_length: number;
  revision: number;
}

function enc(name: string): string {
  return encodeURIComponent(name);
}
