/** Bearer-token authentication shared by every service. */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { unauthorized } from './errors.js';

/** The token a request presents, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

/** Accepts a request whose bearer token is one of `tokens`; 401 otherwise. Constant-time comparison. */
export function requireToken(req: IncomingMessage, tokens: readonly string[]): string {
  const presented = bearerToken(req);
  if (presented === null) throw unauthorized('missing bearer token (Authorization: Bearer <token>)');
  const p = Buffer.from(presented);
  for (const t of tokens) {
    const b = Buffer.from(t);
    if (b.length === p.length && timingSafeEqual(b, p)) return presented;
  }
  throw unauthorized('wrong bearer token');
}
