/**
 * Signed URLs of the object store: `?expires=<ms>&scope=<key prefix>&access=<read|write>&sig=<hex>`, the signature an
 * HMAC-SHA256 of (access, scope, expires) under the signing secret. A scope is a key prefix ending in `/` (an
 * upload's `uploads/<id>/`, a video's `videos/<id>/`) so one URL covers an upload's chunks and tus calls. The app
 * tier signs, the store verifies; both derive the secret from the cluster token (`signingSecret`), which every
 * process of the cluster is given, so no extra secret file has to be shared. Rotating the cluster token rotates it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type Access = 'read' | 'write';

export interface SignedParams {
  expires: number;
  scope: string;
  access: Access;
  sig: string;
}

export function signingSecret(clusterToken: string): Buffer {
  return createHmac('sha256', clusterToken).update('video/object-store/url-signing/v1').digest();
}

function mac(secret: Buffer, access: Access, scope: string, expires: number): string {
  return createHmac('sha256', secret).update(`${access}\n${scope}\n${expires}`).digest('hex');
}

/** The query string (without `?`) granting `access` to keys under `scope` until `expires` (ms since the epoch). */
export function signQuery(secret: Buffer, access: Access, scope: string, expires: number): string {
  const q = new URLSearchParams({ expires: String(expires), scope, access, sig: mac(secret, access, scope, expires) });
  return q.toString();
}

export type Verdict =
  | { ok: true; params: SignedParams }
  | { ok: false; code: 'unsigned' | 'bad_signature' | 'expired' | 'out_of_scope' | 'wrong_access'; message: string };

/**
 * Whether `query` grants `access` to `key` at `now`. A write grant also allows reads of its scope (a client resuming
 * an upload lists the chunks it already sent with the URL it was given).
 */
export function verifySigned(
  secret: Buffer,
  query: URLSearchParams,
  key: string,
  access: Access,
  now: number,
): Verdict {
  const sig = query.get('sig');
  const scope = query.get('scope');
  const expiresText = query.get('expires');
  const granted = query.get('access');
  if (sig === null || scope === null || expiresText === null || granted === null)
    return {
      ok: false,
      code: 'unsigned',
      message: 'this URL needs expires, scope, access and sig (a signed URL from the API) or a bearer token',
    };
  const expires = Number(expiresText);
  if (!/^\d{1,16}$/.test(expiresText) || (granted !== 'read' && granted !== 'write') || !/^[0-9a-f]{64}$/.test(sig))
    return { ok: false, code: 'bad_signature', message: 'the signature parameters are malformed' };
  const want = Buffer.from(mac(secret, granted, scope, expires), 'hex');
  if (!timingSafeEqual(want, Buffer.from(sig, 'hex')))
    return { ok: false, code: 'bad_signature', message: 'the signature does not match' };
  if (expires <= now)
    return { ok: false, code: 'expired', message: `the URL expired at ${new Date(expires).toISOString()}` };
  if (!scope.endsWith('/') || !key.startsWith(scope))
    return { ok: false, code: 'out_of_scope', message: `the URL is for keys under ${scope}` };
  if (access === 'write' && granted !== 'write')
    return { ok: false, code: 'wrong_access', message: 'the URL grants reads only' };
  return { ok: true, params: { expires, scope, access: granted, sig } };
}
