/**
 * The cryptography of the TCP transport's handshake: a key derived from the cluster secret, fresh nonces, and
 * the two MACs that prove each side of a connection holds the key. Sequence (see inbound.ts and peer-link.ts):
 *
 *   acceptor -> dialer   challenge {acceptorNonce}
 *   dialer   -> acceptor hello     {from, to, dialerNonce, mac = HMAC(key, "hello" | acceptorNonce | dialerNonce | from | to)}
 *   acceptor -> dialer   welcome   {mac = HMAC(key, "welcome" | dialerNonce | acceptorNonce | to | from)}
 *
 * Both nonces are fresh per connection, so a hello or welcome recorded on one connection is worthless on another;
 * the member ids are inside the MACs, so a hello made for one (from, to) pair cannot be passed off as another.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NodeId } from '../types.js';

/** Bytes of each side's nonce. */
const NONCE_BYTES = 32;
/** Shortest nonce accepted from the other side. */
export const MIN_NONCE_BYTES = 16;
/**
 * Largest frame accepted before the handshake completes (on either side): handshake frames are a few hundred
 * bytes, so an unauthenticated peer cannot make us buffer more than this per connection.
 */
export const HANDSHAKE_MAX_FRAME_BYTES = 4096;

/** Domain separation: the cluster secret may also be an HTTP bearer token, so it never keys the MACs directly. */
const KEY_LABEL = 'raftkit raft transport v2';

/** The secret every member of a cluster shares, as given in TcpTransportOptions. */
export type TransportSecret = string | Uint8Array;

/** Derives the transport's MAC key from the cluster secret. Throws TypeError on an empty secret. */
export function deriveTransportKey(secret: TransportSecret): Buffer {
  const bytes = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  if (bytes.byteLength === 0) throw new TypeError('TcpTransport needs a non-empty secret shared by all members');
  return createHmac('sha256', bytes).update(KEY_LABEL).digest();
}

/** A fresh random nonce. */
export function newNonce(): Buffer {
  return randomBytes(NONCE_BYTES);
}

/** The dialer's proof: it holds the key, answers this acceptor nonce, and speaks as `from` to `to`. */
export function helloMac(
  key: Buffer,
  acceptorNonce: Uint8Array,
  dialerNonce: Uint8Array,
  from: NodeId,
  to: NodeId,
): Buffer {
  return mac(key, 'hello', [acceptorNonce, dialerNonce, from, to]);
}

/** The acceptor's proof: it holds the key, answers this dialer nonce, and is `to` accepting `from`. */
export function welcomeMac(
  key: Buffer,
  dialerNonce: Uint8Array,
  acceptorNonce: Uint8Array,
  to: NodeId,
  from: NodeId,
): Buffer {
  return mac(key, 'welcome', [dialerNonce, acceptorNonce, to, from]);
}

/** Compares a received MAC with the expected one in constant time. */
export function macMatches(received: Uint8Array, expected: Buffer): boolean {
  return received.byteLength === expected.byteLength && timingSafeEqual(received, expected);
}

/** Each field is length-prefixed so that no two field lists encode alike ("ab"|"c" vs "a"|"bc"). */
function mac(key: Buffer, label: string, fields: Array<Uint8Array | string>): Buffer {
  const hmac = createHmac('sha256', key).update(label);
  for (const field of fields) {
    const bytes = typeof field === 'string' ? Buffer.from(field, 'utf8') : field;
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32BE(bytes.byteLength, 0);
    hmac.update(length).update(bytes);
  }
  return hmac.digest();
}
