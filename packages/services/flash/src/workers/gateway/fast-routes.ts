/**
 * The two hot requests of a deal this gateway holds, as the router's exact routes (packages/platform/http `Router.exact`: a
 * Map lookup, no route matching): `POST /api/flash/{deal}/attempt` and `GET /api/flash/{deal}/state`, registered
 * when the deal is first held and dropped when it is forgotten. The same gates, order and answers as the general
 * routes, which take everything else (a query string, an encoded byte, a deal not held here yet).
 *
 * Every gate that can answer from memory runs synchronously and its answer is written from bytes serialised once
 * (`answerWire`); only an attempt that must wait (the inventory, a key being decided here) takes a promise.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, parseJsonBody, sendJson, type Logger, type Router } from '@raftkit/http';
import {
  answerWire,
  BODY_TOO_LARGE,
  DEAL_ID,
  errorWire,
  MAX_ATTEMPT_BODY,
  STATE_HEADERS,
  writeWire,
  type AttemptAnswer,
} from './answers.js';
import type { Admission } from './admission.js';
import type { Attempts } from './attempt.js';
import { stateBodyOf, type DealCache, type DealEntry } from './deal-cache.js';

/** The attempt's body as the exact route reads it: its own bound and refusal. */
const ATTEMPT_BODY = { maxBytes: MAX_ATTEMPT_BODY, tooLarge: BODY_TOO_LARGE };

export class FastRoutes {
  private router: Router | null = null;

  constructor(
    private readonly cache: DealCache,
    private readonly admission: Admission,
    private readonly attempts: Attempts,
    private readonly logger: Logger,
  ) {}

  /** The router the routes go on (its general routes for attempt and state must be declared already). */
  attach(router: Router): void {
    this.router = router;
    for (const entry of this.cache.entries()) this.add(entry);
  }

  /** A deal first held here: its two exact routes. */
  add(entry: DealEntry): void {
    const router = this.router;
    const dealId = entry.snapshot.dealId;
    // Only ids a client can name (the general routes refuse the others with 400).
    if (router === null || !DEAL_ID.test(dealId)) return;
    router.exact('GET', `/api/flash/${dealId}/state`, { admits: 'open' }, (_req, res) => {
      const held = this.cache.get(dealId) ?? entry;
      res.writeHead(200, STATE_HEADERS);
      res.end(stateBodyOf(held));
    });
    router.exact('POST', `/api/flash/${dealId}/attempt`, { admits: 'open', body: ATTEMPT_BODY }, (req, res, body) =>
      this.attemptBody(dealId, body!, req, res),
    );
  }

  /** A deal forgotten: its requests go to the general routes again. */
  drop(dealId: string): void {
    this.router?.dropExact('GET', `/api/flash/${dealId}/state`);
    this.router?.dropExact('POST', `/api/flash/${dealId}/attempt`);
  }

  /** An attempt's body has arrived: the gates, in the same order and with the same answers as `Attempts.attempt`. */
  private attemptBody(dealId: string, body: Buffer, req: IncomingMessage, res: ServerResponse): void {
    let waiting: Promise<AttemptAnswer>;
    try {
      const input = this.admission.attemptInput(dealId, parseJsonBody(body.toString('utf8')), req);
      const now = Date.now();
      this.admission.frontGates(input, now);
      const entry = this.cache.get(dealId);
      if (entry === undefined) waiting = this.attempts.attemptAfterFront(input, now);
      else {
        const next = this.attempts.localGates(entry, input, now);
        if (typeof next === 'object') return writeWire(res, answerWire(next));
        waiting = this.attempts.afterLocalGates(entry, input, next);
      }
    } catch (error) {
      return this.failAttempt(res, error);
    }
    waiting.then(
      (answer) => writeWire(res, answerWire(answer)),
      (error: unknown) => this.failAttempt(res, error),
    );
  }

  private failAttempt(res: ServerResponse, error: unknown): void {
    if (error instanceof HttpError) return writeWire(res, errorWire(error));
    this.logger.log('error', 'attempt failed', { error: String((error as Error)?.stack ?? error) });
    if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal', message: 'internal error' } });
  }
}

/**
 * An attempt's body read as the exact route reads it (at most MAX_ATTEMPT_BODY kept, the rest drained, then 413),
 * for the general route when the request target is the one the exact route takes: an attempt is answered alike
 * before and after this gateway holds its deal.
 */
export function readAttemptBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_ATTEMPT_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_ATTEMPT_BODY) return reject(BODY_TOO_LARGE);
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', reject);
  });
}
