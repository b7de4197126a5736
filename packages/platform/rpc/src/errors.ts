/**
 * One error model for every binary protocol, the same as the HTTP plumbing's: an error is a `code` (the strings
 * HTTP error bodies carry: bad_request, unauthorized, forbidden, not_found, unavailable...) and a message, and each
 * code has the HTTP status a gateway answers with. A handler may throw an HttpError (the one a route would throw)
 * or an RpcError; the caller receives an RpcError with the same code either way.
 */
import { HttpError } from '@raftkit/http';
import { FrameTooLargeError } from '@raftkit/raft';

/** HTTP status of the codes the transport itself produces, and of the common service codes. */
export const RPC_ERROR_STATUS: Readonly<Record<string, number>> = {
  bad_request: 400,
  malformed: 400,
  too_many_calls: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  frame_too_large: 413,
  cancelled: 499,
  internal: 500,
  unavailable: 503,
  overloaded: 503,
  closed: 503,
  timeout: 504,
};

/** A call or a connection that failed; `code` says why, `status` is the HTTP status it maps onto. */
export class RpcError extends Error {
  override name = 'RpcError';
  readonly status: number;
  constructor(
    readonly code: string,
    message: string,
    status?: number,
  ) {
    super(message);
    this.status = status ?? RPC_ERROR_STATUS[code] ?? 500;
  }

  /** The error as the wire carries it. */
  body(): RpcErrorBody {
    return { code: this.code, message: this.message, status: this.status };
  }

  /** The same error as an HTTP answer (for a gateway that relays a call). */
  toHttpError(): HttpError {
    return new HttpError(this.status, this.code, this.message);
  }
}

/** An error on the wire: `[id, 1, body]` for a call, `{ error: body }` for the connection. */
export interface RpcErrorBody {
  code: string;
  message: string;
  status?: number;
}

/**
 * What a caller learns of an error thrown by a handler or met by the transport: RpcErrors and HttpErrors keep
 * their code and message; a refused frame is `frame_too_large`; anything else is `internal`, without its message
 * (internals are not leaked; the server logs them).
 */
export function toRpcError(error: unknown): RpcError {
  if (error instanceof RpcError) return error;
  if (error instanceof HttpError) return new RpcError(error.code, error.message, error.status);
  if (error instanceof FrameTooLargeError) return new RpcError('frame_too_large', error.message);
  return new RpcError('internal', 'internal error');
}

/** Whether `error` is one the server expects (answered as is) rather than a bug (logged, answered `internal`). */
export function isExpectedError(error: unknown): boolean {
  return error instanceof RpcError || error instanceof HttpError;
}

/** The RpcError a received body describes (a peer's body is untrusted: anything missing gets a default). */
export function fromErrorBody(body: unknown, fallback: string): RpcError {
  const record = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const code = typeof record.code === 'string' ? record.code : 'internal';
  const message = typeof record.message === 'string' ? record.message : fallback;
  const status =
    typeof record.status === 'number' && Number.isInteger(record.status) && record.status >= 400 && record.status <= 599
      ? record.status
      : undefined;
  return new RpcError(code, message, status);
}
