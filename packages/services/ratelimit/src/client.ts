/**
 * For calling services: RateLimitClient over the binary check protocol (pipelined; checks made in the same turn
 * of the event loop leave in one frame), HttpRateLimitClient over POST /v1/check, and rateLimitMiddleware for
 * node:http-style `(req, res, next)` servers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ClusterClient, ServiceError } from '@raftkit/http';
import type { CheckRequest } from './workers/check/decide.js';
import { answerFromTuple, checkTuple, type AnswerTuple, type CheckTuple } from './workers/check/request.js';
import { RpcClient, RpcError, type CallOptions } from '@raftkit/rpc';

export type CheckInput = CheckRequest;

export interface CheckResult {
  allowed: boolean;
  /** -1 when not known (no rule matched, or the store was unreachable and the rule fails open). */
  remaining: number;
  retryAfterMs?: number;
  resetMs: number;
  /** The check instance's queue to its store was full: decided from its local fallback buckets (README "Overload"). */
  overloaded?: boolean;
}

export interface RateLimiter {
  check(input: CheckInput): Promise<CheckResult>;
  close(): void;
}

/** The service refused the check itself (bad input, wrong key, unknown service_id): `code` says which. */
export class RateLimitError extends Error {
  override name = 'RateLimitError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function toCheckResult(answer: unknown): CheckResult {
  return answerFromTuple(answer as AnswerTuple);
}

/** Failures of the connection, after which the next check instance is tried. */
const TRANSIENT = new Set(['unavailable', 'timeout', 'closed', 'overloaded']);

/** Returns when the next instance may be tried; otherwise throws the failure as the caller should see it. */
function throwUnlessTransient(error: unknown): asserts error is RpcError {
  if (!(error instanceof RpcError)) throw error;
  if (!TRANSIENT.has(error.code)) throw new RateLimitError(error.code, error.message);
}

/** A failure of the only instance: nothing to move on to. */
/** A check's call: its reply decoded in the RPC layer, not by a `.then` per check (CallOptions.decode). */
const CHECK_CALL: CallOptions<CheckResult> = { decode: toCheckResult };

export class RateLimitClient implements RateLimiter {
  private readonly wires: RpcClient[];
  private next = 0;

  /** `addresses`: host:port of the check instances' binary listeners; the client moves on when one fails. */
  constructor(options: { addresses: string[]; token: string; timeoutMs?: number; maxInFlight?: number }) {
    if (options.addresses.length === 0) throw new TypeError('at least one address is needed');
    this.wires = options.addresses.map(
      (address) =>
        new RpcClient({
          address,
          token: options.token,
          timeoutMs: options.timeoutMs ?? 1_000,
          maxInFlight: options.maxInFlight ?? 100_000,
        }),
    );
  }

  check(input: CheckInput): Promise<CheckResult> {
    const tuple = checkTuple(input);
    // One instance: nothing to move on to, so no per-check closure to remember where this check was tried.
    if (this.wires.length === 1) return this.wires[0]!.call(tuple, CHECK_CALL);
    return this.attempt(tuple, 0);
  }

  /**
   * One try on the current instance, then the next ones. Plain promise chaining rather than an async function
   * with a loop: this runs for every check of the calling service, and each async layer costs promise ticks.
   */
  private attempt(tuple: CheckTuple, attempt: number): Promise<CheckResult> {
    const at = this.next;
    const wire = this.wires[at % this.wires.length]!;
    return wire.call(tuple, CHECK_CALL).catch((error: unknown) => {
      throwUnlessTransient(error);
      // Concurrent checks that failed on the same instance move on together, by one.
      if (this.next === at) this.next++;
      if (attempt + 1 >= this.wires.length) throw error;
      return this.attempt(tuple, attempt + 1);
    });
  }

  close(): void {
    for (const wire of this.wires) wire.close();
  }
}

export class HttpRateLimitClient implements RateLimiter {
  private readonly http: ClusterClient;

  /** `endpoints`: base URLs of check instances (http://127.0.0.1:7041 ...). */
  constructor(options: { endpoints: string[]; token: string; timeoutMs?: number }) {
    this.http = new ClusterClient({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 1_000,
    });
  }

  async check(input: CheckInput): Promise<CheckResult> {
    const body = { service_id: input.serviceId, endpoint: input.endpoint, identifiers: input.identifiers };
    let answer: {
      allowed: boolean;
      remaining: number;
      retry_after_ms?: number;
      reset_ms: number;
      overloaded?: boolean;
    };
    try {
      answer = (await this.http.call('POST', '/v1/check', body)) as typeof answer;
    } catch (error) {
      if (error instanceof ServiceError) throw new RateLimitError(error.code, error.message);
      throw error;
    }
    const result: CheckResult = { allowed: answer.allowed, remaining: answer.remaining, resetMs: answer.reset_ms };
    if (answer.retry_after_ms !== undefined) result.retryAfterMs = answer.retry_after_ms;
    if (answer.overloaded === true) result.overloaded = true;
    return result;
  }

  close(): void {}
}

export interface MiddlewareOptions {
  serviceId: string;
  /** The endpoint (default: the request's path) and identifiers of a request. */
  identify(req: IncomingMessage): { endpoint?: string; ip?: string; user_id?: string; api_key?: string };
  /** Told about checks that failed (the request was let through). */
  onError?(error: unknown, req: IncomingMessage): void;
}

/**
 * Calls the check for every request. Sets X-RateLimit-Remaining (when known), X-RateLimit-Reset (seconds until the
 * bucket is full again, as the IETF RateLimit header draft's delta-seconds) and, when denied, Retry-After (seconds,
 * rounded up, at least 1) and answers 429 with a JSON error body; otherwise calls next(). When the check itself
 * fails (the service is unreachable), the request goes through: the limiter fails open, as the service does.
 */
export function rateLimitMiddleware(
  limiter: RateLimiter,
  options: MiddlewareOptions,
): (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void {
  return (req, res, next) => {
    let input: CheckInput;
    try {
      const who = options.identify(req);
      const identifiers: CheckInput['identifiers'] = {};
      if (who.ip !== undefined) identifiers.ip = who.ip;
      if (who.user_id !== undefined) identifiers.user_id = who.user_id;
      if (who.api_key !== undefined) identifiers.api_key = who.api_key;
      input = { serviceId: options.serviceId, endpoint: who.endpoint ?? (req.url ?? '/').split('?')[0]!, identifiers };
    } catch (error) {
      next(error);
      return;
    }
    limiter.check(input).then(
      (result) => {
        if (result.remaining >= 0) res.setHeader('X-RateLimit-Remaining', String(result.remaining));
        res.setHeader('X-RateLimit-Reset', String(Math.ceil(result.resetMs / 1000)));
        if (result.allowed) return next();
        const retryAfterMs = result.retryAfterMs ?? 1_000;
        const body = JSON.stringify({
          error: { code: 'rate_limited', message: 'too many requests', retry_after_ms: retryAfterMs },
        });
        res.writeHead(429, {
          'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        });
        res.end(body);
      },
      (error: unknown) => {
        options.onError?.(error, req);
        next();
      },
    );
  };
}
