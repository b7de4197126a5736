/**
 * Bearer-token authentication shared by every service. The cluster token (from `cluster up`) is accepted
 * everywhere; per-client tokens are derived from it by HMAC (`client.<name>.<mac>`), so every member can verify
 * them without any replicated state. Revoking client tokens means rotating the cluster token.
 *
 * A service's own workers present a third kind, `service.<service>.<mac>` (deriveServiceToken): an internal caller
 * of that service and of no other. Its MAC is over another message than a client token's, so no endpoint that
 * issues client tokens (whatever name it is asked for, `service.notify` included) can mint one.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { badRequest, unauthorized } from './errors.js';

/**
 * Who a request is: the cluster operator, a service's own workers (`name` is `service.<service>`) or a named
 * client (a user, a tenant key...). `hash` identifies the token (for ownership).
 */
export interface Principal {
  kind: 'cluster' | 'service' | 'client';
  name: string;
  hash: string;
}

/** The token a request presents, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}

/** The value of the cookie `name` a request carries, or null. */
export function cookieValue(req: IncomingMessage, name: string): string | null {
  const header = req.headers.cookie;
  if (typeof header !== 'string') return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

const CLIENT_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** A per-client token, derived from the cluster token. */
export function deriveClientToken(clusterToken: string, client: string): string {
  if (!CLIENT_NAME.test(client))
    throw badRequest('invalid_field', 'client must be 1 to 64 characters of A-Z a-z 0-9 . _ -', { field: 'client' });
  return `client.${client}.${mac(clusterToken, client)}`;
}

function mac(clusterToken: string, client: string): string {
  return createHmac('sha256', clusterToken).update(`client:${client}`).digest('base64url');
}

/** Service names as `cluster up --service` knows them (kv, notify, feed...). */
export const SERVICE_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/** The token of `service`'s own workers, derived from the cluster token; its principal is `service.<service>`. */
export function deriveServiceToken(clusterToken: string, service: string): string {
  if (!SERVICE_NAME.test(service))
    throw badRequest('invalid_field', 'service must be 1 to 32 characters of a-z 0-9 - (a letter first)', {
      field: 'service',
    });
  return `service.${service}.${serviceMac(clusterToken, service)}`;
}

function serviceMac(clusterToken: string, service: string): string {
  return createHmac('sha256', clusterToken).update(`service:${service}`).digest('base64url');
}

/** The principal name of `service`'s workers. */
export function servicePrincipal(service: string): string {
  return `service.${service}`;
}

/**
 * Whether `p` is an internal caller of `service`: the cluster token, or the service token of that service's own
 * workers. Never a client token, whatever its name.
 */
export function isInternalCaller(p: Principal | null, service: string): boolean {
  return p !== null && (p.kind === 'cluster' || (p.kind === 'service' && p.name === servicePrincipal(service)));
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Hashes of tokens seen recently: every request presents one, and SHA-256 per request showed in profiles. */
const hashes = new Map<string, string>();

export function tokenHash(token: string): string {
  let hash = hashes.get(token);
  if (hash === undefined) {
    hash = createHash('sha256').update(token).digest('base64url').slice(0, 22);
    if (hashes.size >= 1024) hashes.clear();
    hashes.set(token, hash);
  }
  return hash;
}

/**
 * Authorization headers already proven, per list of cluster tokens: a client sends the same header on every
 * request, so a hit skips parsing it as well as proving its token. Only successes are kept; the map is bounded.
 */
const provenHeaders = new WeakMap<readonly string[], Map<string, Principal>>();

/** The principal a request's bearer token proves; 401 when missing or wrong. */
export function authenticate(req: IncomingMessage, clusterTokens: readonly string[]): Principal {
  const header = req.headers.authorization;
  let known = provenHeaders.get(clusterTokens);
  if (typeof header === 'string') {
    const hit = known?.get(header);
    if (hit !== undefined) return hit;
  }
  const presented = bearerToken(req);
  if (presented === null) throw unauthorized('missing bearer token (Authorization: Bearer <token>)');
  const principal = verifyToken(presented, clusterTokens);
  if (known === undefined) provenHeaders.set(clusterTokens, (known = new Map()));
  if (known.size >= MAX_VERIFIED) known.clear();
  known.set(header as string, principal);
  return principal;
}

/**
 * Tokens already proven, per list of cluster tokens: an HMAC per request showed in the rate limiter's profiles
 * (about 8% of a check over HTTP). Only successes are kept, and the map is bounded.
 */
const verified = new WeakMap<readonly string[], Map<string, Principal>>();
const MAX_VERIFIED = 4096;

/** The principal a token proves, however it arrived (HTTP header, a binary protocol's hello); 401 when wrong. */
export function verifyToken(presented: string, clusterTokens: readonly string[]): Principal {
  let known = verified.get(clusterTokens);
  const hit = known?.get(presented);
  if (hit !== undefined) return hit;
  const principal = prove(presented, clusterTokens);
  if (known === undefined) verified.set(clusterTokens, (known = new Map()));
  if (known.size >= MAX_VERIFIED) known.clear();
  known.set(presented, principal);
  return principal;
}

function prove(presented: string, clusterTokens: readonly string[]): Principal {
  for (const t of clusterTokens)
    if (same(t, presented)) return { kind: 'cluster', name: 'cluster', hash: tokenHash(presented) };
  const m = /^client\.([A-Za-z0-9._-]{1,64})\.([A-Za-z0-9_-]+)$/.exec(presented);
  if (m !== null) {
    for (const t of clusterTokens)
      if (same(mac(t, m[1]!), m[2]!)) return { kind: 'client', name: m[1]!, hash: tokenHash(presented) };
  }
  const s = /^service\.([a-z][a-z0-9-]{0,31})\.([A-Za-z0-9_-]+)$/.exec(presented);
  if (s !== null) {
    for (const t of clusterTokens)
      if (same(serviceMac(t, s[1]!), s[2]!))
        return { kind: 'service', name: servicePrincipal(s[1]!), hash: tokenHash(presented) };
  }
  throw unauthorized('wrong bearer token');
}
