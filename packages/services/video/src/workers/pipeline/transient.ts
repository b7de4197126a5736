/**
 * Which failures of a worker's step are the cluster's (a store or member down or restarting, a 5xx, a cut
 * connection, a timeout) rather than the video's. The first kind passes by itself: it is retried, and never fails a
 * video; only the second (a source ffmpeg cannot read, a plan that does not fit, a 4xx) counts against the task's
 * attempts.
 */
import { HttpError } from '@raftkit/http';

/** Error codes of a connection that failed or was cut (node's and undici's), and of a request that timed out. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_ABORTED',
]);

export function isTransient(error: unknown): boolean {
  if (error instanceof HttpError) return error.status >= 500 || error.status === 408 || error.status === 429;
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && TRANSIENT_CODES.has(e.code)) return true;
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return true;
  // A copy that went bad while it streamed: the store drops and repairs it, the next read gets a good one.
  if (typeof e.message === 'string' && e.message.endsWith('the bytes read do not match their sha256')) return true;
  return e.cause !== undefined && e.cause !== error && isTransient(e.cause);
}

/**
 * Runs `step` again while it fails transiently, backing off from 250 ms to 4 s, until `deadline`; then (or on any
 * other failure) throws its last error.
 */
export async function retryTransient<T>(
  step: () => Promise<T>,
  deadline: number,
  onRetry: (error: unknown, waitMs: number) => void = () => undefined,
): Promise<T> {
  for (let wait = 250; ; wait = Math.min(wait * 2, 4_000)) {
    try {
      return await step();
    } catch (error) {
      if (!isTransient(error) || Date.now() + wait >= deadline) throw error;
      onRetry(error, wait);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
