/**
 * The user agent's side of Web Push, written from the RFCs with node:crypto (independently of the `web-push`
 * library the sender uses, so a wrong encryption on either side shows): a subscriber's keys (RFC 8291: a P-256
 * key pair and a 16-byte auth secret), decryption of an `aes128gcm` body (RFC 8188 records, RFC 8291 key
 * derivation), and the push service's check of a VAPID `Authorization: vapid t=<JWT>, k=<key>` header (RFC 8292,
 * an ES256 JWT with aud = the endpoint's origin, exp at most 24 h ahead, and a sub contact).
 */
import { createDecipheriv, createECDH, createPublicKey, hkdfSync, verify } from 'node:crypto';

export interface SubscriberKeys {
  /** The uncompressed P-256 public key (65 bytes), base64url: the subscription's keys.p256dh. */
  p256dh: string;
  /** 16 random bytes, base64url: the subscription's keys.auth. */
  auth: string;
  /** The private scalar (32 bytes), base64url: stays with the user agent (here: the stand-in push service). */
  privateKey: string;
}

export function b64u(buf: Uint8Array): string {
  return Buffer.from(buf).toString('base64url');
}

function fromB64u(text: string): Buffer {
  return Buffer.from(text, 'base64url');
}

/** A fresh subscriber, as a browser makes one when it subscribes. */
export function createSubscriberKeys(): SubscriberKeys {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const auth = Buffer.alloc(16);
  crypto.getRandomValues(auth);
  // getPrivateKey() drops leading zero bytes (about 1 key in 128): pad back to the scalar's 32 bytes.
  const d = ecdh.getPrivateKey();
  return {
    p256dh: b64u(ecdh.getPublicKey()),
    auth: b64u(auth),
    privateKey: b64u(Buffer.concat([Buffer.alloc(32 - d.length), d])),
  };
}

export class PushCryptoError extends Error {
  override name = 'PushCryptoError';
}

/** Decrypts an RFC 8291 `aes128gcm` push message body for the subscriber `keys`; throws PushCryptoError. */
export function decryptAes128gcm(body: Buffer, keys: SubscriberKeys): Buffer {
  if (body.length < 21) throw new PushCryptoError('body shorter than the aes128gcm header');
  const salt = body.subarray(0, 16);
  const rs = body.readUInt32BE(16);
  const idlen = body[20]!;
  if (rs < 18) throw new PushCryptoError('record size below 18');
  if (idlen !== 65) throw new PushCryptoError('keyid must be the 65-byte application server public key');
  const asPublic = body.subarray(21, 21 + idlen);
  const records = body.subarray(21 + idlen);
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(fromB64u(keys.privateKey));
  const uaPublic = fromB64u(keys.p256dh);
  let ecdhSecret: Buffer;
  try {
    ecdhSecret = ecdh.computeSecret(asPublic);
  } catch {
    throw new PushCryptoError('keyid is not a P-256 point');
  }
  // RFC 8291 section 3.4: IKM from the ECDH secret keyed by the auth secret, then RFC 8188's CEK and nonce.
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), uaPublic, asPublic]);
  const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, fromB64u(keys.auth), keyInfo, 32));
  const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const baseNonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const parts: Buffer[] = [];
  let seq = 0;
  for (let off = 0; off < records.length; off += rs, seq++) {
    const record = records.subarray(off, Math.min(off + rs, records.length));
    if (record.length < 17) throw new PushCryptoError('record shorter than its tag');
    const nonce = Buffer.from(baseNonce);
    // The record sequence number is XORed into the nonce's last 6 bytes; it stays below 2^32, so only the last 4
    // change (and JS's ^ works on 32 bits: XORing all 48 at once would lose the top ones).
    nonce.writeUInt32BE((nonce.readUInt32BE(8) ^ seq) >>> 0, 8);
    const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
    decipher.setAuthTag(record.subarray(record.length - 16));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
    } catch {
      throw new PushCryptoError('authentication tag mismatch: wrong keys or corrupted body');
    }
    const last = off + rs >= records.length;
    // Padding: the content, a delimiter (2 in the last record, 1 before), then zeros.
    let end = plain.length - 1;
    while (end >= 0 && plain[end] === 0) end--;
    if (end < 0 || plain[end] !== (last ? 2 : 1)) throw new PushCryptoError('bad padding delimiter');
    parts.push(plain.subarray(0, end));
  }
  return Buffer.concat(parts);
}

export interface VapidClaims {
  aud: string;
  exp: number;
  sub: string;
  /** The application server's public key from `k=`, base64url. */
  key: string;
}

/** Checks a VAPID Authorization header for a push to `origin`; returns the claims or throws PushCryptoError. */
export function verifyVapid(header: string | undefined, origin: string, nowSeconds: number): VapidClaims {
  if (header === undefined) throw new PushCryptoError('no Authorization header');
  const m = /^vapid\s+(.*)$/i.exec(header.trim());
  if (m === null) throw new PushCryptoError('Authorization scheme must be vapid');
  const params = new Map<string, string>();
  for (const part of m[1]!.split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) params.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const token = params.get('t');
  const key = params.get('k');
  if (token === undefined || key === undefined) throw new PushCryptoError('vapid needs t= and k=');
  const [h, p, s] = token.split('.');
  if (h === undefined || p === undefined || s === undefined) throw new PushCryptoError('t is not a JWT');
  let header0: { alg?: unknown; typ?: unknown };
  let claims: { aud?: unknown; exp?: unknown; sub?: unknown };
  try {
    header0 = JSON.parse(fromB64u(h).toString('utf8')) as typeof header0;
    claims = JSON.parse(fromB64u(p).toString('utf8')) as typeof claims;
  } catch {
    throw new PushCryptoError('JWT parts are not JSON');
  }
  if (header0.alg !== 'ES256') throw new PushCryptoError('JWT alg must be ES256');
  const raw = fromB64u(key);
  if (raw.length !== 65 || raw[0] !== 4) throw new PushCryptoError('k must be an uncompressed P-256 point');
  let publicKey;
  try {
    publicKey = createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: b64u(raw.subarray(1, 33)), y: b64u(raw.subarray(33)) },
      format: 'jwk',
    });
  } catch {
    throw new PushCryptoError('k is not on P-256');
  }
  const ok = verify('sha256', Buffer.from(`${h}.${p}`), { key: publicKey, dsaEncoding: 'ieee-p1363' }, fromB64u(s));
  if (!ok) throw new PushCryptoError('JWT signature does not verify with k');
  if (claims.aud !== origin) throw new PushCryptoError(`JWT aud must be ${origin}`);
  if (typeof claims.exp !== 'number' || claims.exp <= nowSeconds || claims.exp > nowSeconds + 24 * 3600) {
    throw new PushCryptoError('JWT exp must be in the future and at most 24 h ahead');
  }
  if (typeof claims.sub !== 'string' || !/^(mailto:|https?:)/.test(claims.sub))
    throw new PushCryptoError('JWT sub must be a mailto: or https: contact');
  return { aud: claims.aud, exp: claims.exp, sub: claims.sub, key };
}
