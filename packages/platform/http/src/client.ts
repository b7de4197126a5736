/**
 * The one client for a service's cluster, used by every service client and by workers that call the members:
 * a keep-alive connection pool per member, the bearer token, a preferred member for reads, optionally the leader
 * (tracked from GET /v1/cluster/status) for writes, and failover to the next member, with backoff once every
 * member was tried, while the answer is 503 or the connection fails, until a deadline.
 */
import { Pool } from 'undici';
import { connectOptions } from './tls.js';

export interface ClusterClientOptions {
  /** Base URLs of the members, e.g. http://127.0.0.1:7101 */
  endpoints: string[];
  token: string;
  /** Give up after this long per call. Default 15 s. */
  timeoutMs?: number;
  /** The member tried first (an index into endpoints, taken modulo their number), e.g. to spread readers. */
  preferred?: number;
  /**
   * The members' ids, in the order of `endpoints`: with them, writes (every method but GET) go first to the
   * member GET /v1/cluster/status names as leader, refreshed every `leaderRefreshMs`. A follower would forward
   * them; going to the leader saves that hop.
   */
  ids?: string[];
  leaderRefreshMs?: number;
  /** Connections per member. Default 32. */
  connections?: number;
  /** PEM of the CA https endpoints' certificates are checked against. Default: the process's (useClusterTls), else the system's. */
  ca?: string | Buffer;
}

export class ServiceError extends Error {
  override name = 'ServiceError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

/** A member's answer, whatever its status (except the 503s and failures that were failed over). */
export interface ClusterAnswer {
  status: number;
  body: unknown;
  /** The answer's headers as received (a redirect's Location, Retry-After...), where the caller kept them. */
  headers?: Record<string, string | string[] | undefined>;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export class ClusterClient {
  readonly timeoutMs: number;
  private readonly pools: Pool[];
  private preferred: number;
  /** The member believed to lead (null: unknown, writes go to the preferred member). */
  private leader: number | null = null;
  private readonly leaderTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: ClusterClientOptions) {
    if (options.endpoints.length === 0) throw new TypeError('at least one endpoint is needed');
    if (options.ids !== undefined && options.ids.length !== options.endpoints.length)
      throw new TypeError('ids must match endpoints one to one');
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.pools = options.endpoints.map(
      (e) =>
        new Pool(e, {
          connections: options.connections ?? 32,
          keepAliveTimeout: 30_000,
          ...connectOptions(options.ca),
        }),
    );
    this.preferred = (options.preferred ?? 0) % this.pools.length;
    if (options.ids !== undefined) {
      void this.refreshLeader();
      this.leaderTimer = setInterval(() => void this.refreshLeader(), options.leaderRefreshMs ?? 2000);
      this.leaderTimer.unref();
    }
  }

  /** The body of a 2xx answer; any other answer is a ServiceError (503s are failed over until the deadline). */
  async call(
    method: string,
    path: string,
    body?: string | object,
    headers: Record<string, string> = {},
    timeoutMs = this.timeoutMs,
  ): Promise<unknown> {
    const answer = await this.request(method, path, body, { headers, timeoutMs });
    if (answer.status < 300) return answer.body;
    throw answerError(answer);
  }

  /**
   * One call; on a connection failure or a 503 the next member is tried until the deadline, then a ServiceError
   * 503 `unavailable` naming the last failure. Any other answer is returned as it is.
   */
  async request(
    method: string,
    path: string,
    body?: string | object,
    options: RequestOptions = {},
  ): Promise<ClusterAnswer> {
    const write = method !== 'GET';
    const first = write && this.leader !== null ? this.leader : this.preferred;
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    const { payload, headers } = this.prepare(body, options);
    let last = 'no member answered in time';
    let lastBody: unknown = null;
    let lapsedSessions = 0;
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      const member = (first + attempt) % this.pools.length;
      try {
        const answer = await this.once(member, method, path, payload, headers, remaining);
        if (lapsedSessions < 1 && memberSessionLapsed(answer, headers)) {
          lapsedSessions++;
          attempt--; // the same member again: it registers a fresh session for the retry
          continue;
        }
        if (answer.status !== 503) {
          // Stick to a member that answers, so a dead preferred member costs one failed attempt, not one per call.
          if (!write) this.preferred = member;
          else if (member !== first) this.leader = null;
          return answer;
        }
        last = `a member answered 503: ${JSON.stringify(answer.body).slice(0, 200)}`;
        lastBody = answer.body;
      } catch (error) {
        last = String((error as Error).message ?? error);
      }
      // Back off once every member was tried: a cluster electing a leader needs a moment, not a hot loop.
      const round = Math.floor((attempt + 1) / this.pools.length);
      if ((attempt + 1) % this.pools.length === 0)
        await sleep(Math.min(500, 20 * 2 ** Math.min(round, 5), Math.max(0, deadline - Date.now())));
    }
    throw new ServiceError(503, 'unavailable', `the cluster is unreachable (${last})`, lastBody);
  }

  /**
   * One attempt at one given member (an index into endpoints), its answer whatever the status, 503 included: for
   * tools that must ask a particular member (the cluster CLI's status, partition and membership commands). A
   * connection failure or timeout is thrown as it is.
   */
  async ask(
    member: number,
    method: string,
    path: string,
    body?: string | object,
    options: RequestOptions = {},
  ): Promise<ClusterAnswer> {
    if (!Number.isInteger(member) || member < 0 || member >= this.pools.length)
      throw new RangeError(`no member ${member}`);
    const { payload, headers } = this.prepare(body, options);
    return this.once(member, method, path, payload, headers, options.timeoutMs ?? this.timeoutMs);
  }

  async close(): Promise<void> {
    if (this.leaderTimer !== null) clearInterval(this.leaderTimer);
    await Promise.all(this.pools.map((p) => p.close()));
  }

  private prepare(
    body: string | object | undefined,
    options: RequestOptions,
  ): { payload: string | undefined; headers: Record<string, string> } {
    const payload = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.token}` };
    if (payload !== undefined && typeof body === 'object') headers['content-type'] = 'application/json';
    Object.assign(headers, options.headers);
    return { payload, headers };
  }

  private async once(
    member: number,
    method: string,
    path: string,
    payload: string | undefined,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<ClusterAnswer> {
    const res = await this.pools[member]!.request({
      method: method as 'GET',
      path,
      headers,
      body: payload,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text.length > 0 ? safeJson(text) : null, headers: res.headers };
  }

  /** Ask a member who leads; a hint only, so any failure just leaves writes on the preferred member. */
  private async refreshLeader(): Promise<void> {
    try {
      const answer = await this.request('GET', '/v1/cluster/status', undefined, { timeoutMs: 1000 });
      const id = (answer.body as { leader_id?: unknown } | null)?.leader_id;
      const index = this.options.ids!.indexOf(typeof id === 'string' ? id : '');
      this.leader = index >= 0 ? index : null;
    } catch {
      this.leader = null;
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The `error` object of a JSON error body (`{ error: { code, message, ...details } }`), when it has one. The one
 * reader of error bodies: the clients here and the callers that turn an upstream's answer back into an HttpError
 * (video's internal client) go through it.
 */
export function errorBody(
  body: unknown,
): ({ code?: unknown; message?: unknown } & Record<string, unknown>) | undefined {
  const err = (body as { error?: unknown } | null)?.error;
  return typeof err === 'object' && err !== null
    ? (err as { code?: unknown; message?: unknown } & Record<string, unknown>)
    : undefined;
}

/** The error code of a JSON error body, when it has one. */
export function errorCodeOf(body: unknown): string | undefined {
  const code = errorBody(body)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A non-2xx answer as the ServiceError the clients throw: its status, the body's code and message. */
export function answerError(answer: ClusterAnswer): ServiceError {
  const message = errorBody(answer.body)?.message;
  return new ServiceError(
    answer.status,
    errorCodeOf(answer.body) ?? 'unknown',
    typeof message === 'string' ? message : `HTTP ${answer.status}`,
    answer.body,
  );
}

/** The header naming a client session (POST /v1/client-sessions) on an idempotent write. */
const CLIENT_ID = 'client-id';

/**
 * Whether an answer is a member refusing a command because its own client session had lapsed (410
 * `unknown_session` to a request that named no session of the caller's): the command was not applied, so the
 * clients send it once more, and the member registers a fresh session for it. Members that renew their own
 * session never answer this; the clients keep the retry for members that do not. A 410 to a request that named
 * the caller's session (Client-Id) is the caller's to handle: it opens a new session (KvClient does).
 */
export function memberSessionLapsed(answer: ClusterAnswer, headers: Record<string, string>): boolean {
  if (answer.status !== 410 || errorCodeOf(answer.body) !== 'unknown_session') return false;
  for (const name of Object.keys(headers)) if (name.toLowerCase() === CLIENT_ID) return false;
  return true;
}
