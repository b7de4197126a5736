/**
 * post_id: 48 bits of epoch milliseconds then 40 random bits, in Crockford base32 (10 + 8 characters). Ids sort
 * by creation time as strings (spec rule 5: time-ordered unique ids), spread evenly over hash slots, and carry their
 * own created_at, so an inbox key can be rebuilt from the id alone (a delete needs no lookup).
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
export const POST_ID = /^[0-9A-HJKMNP-TV-Z]{18}$/;

export function newPostId(now: number = Date.now()): string {
  let time = '';
  let t = Math.floor(now);
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(5);
  let rand = '';
  let bits = 0n;
  for (const b of bytes) bits = (bits << 8n) | BigInt(b);
  for (let i = 0; i < 8; i++) {
    rand = ALPHABET[Number(bits & 31n)]! + rand;
    bits >>= 5n;
  }
  return time + rand;
}

/** The creation time (epoch ms) a post id carries. */
export function postIdTime(id: string): number {
  let t = 0;
  for (let i = 0; i < 10; i++) t = t * 32 + ALPHABET.indexOf(id[i]!);
  return t;
}
