/**
 * Login sessions of the dashboard: POST /api/login trades the token for a random cookie id, so the page need not
 * keep the token around (it drops it from the address bar). Bounded: at most MAX_SESSIONS (the oldest go first),
 * each valid for 12 hours.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { bearerToken, cookieValue } from '@raftkit/http';

const COOKIE = 'raftkit_dash';
const SESSION_MS = 12 * 60 * 60 * 1000;
export const MAX_SESSIONS = 1_000;

export class Sessions {
  /** id -> expiry; a Map keeps insertion order, so the first entry is the oldest. */
  private readonly sessions = new Map<string, number>();

  constructor(
    private readonly token: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** True when `presented` is the dashboard's token (constant time). */
  tokenMatches(presented: string): boolean {
    const a = Buffer.from(presented);
    const b = Buffer.from(this.token);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  create(): string {
    const id = randomBytes(24).toString('base64url');
    while (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    this.sessions.set(id, this.now() + SESSION_MS);
    return id;
  }

  valid(id: string): boolean {
    const expiry = this.sessions.get(id);
    if (expiry === undefined) return false;
    if (expiry <= this.now()) {
      this.sessions.delete(id);
      return false;
    }
    return true;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** A request carries the bearer token or a live session cookie. */
  admits(req: IncomingMessage): boolean {
    const bearer = bearerToken(req);
    if (bearer !== null && this.tokenMatches(bearer)) return true;
    const id = cookieValue(req, COOKIE);
    return id !== null && this.valid(id);
  }

  /** The Set-Cookie header of a new session. */
  static header(id: string): string {
    return `${COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_MS / 1000}`;
  }
}
