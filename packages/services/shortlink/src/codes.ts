/**
 * Generated short codes: an id from the replicated allocator goes through a keyed permutation of [0, 62^7) and is
 * written as exactly 7 base62 characters. Distinct ids give distinct codes (the permutation is a bijection), so
 * codes are unique by construction; the permutation makes consecutive ids look unrelated.
 *
 * The permutation is a 6-round Feistel network over 42 bits (two 21-bit halves) restricted to [0, 62^7) by cycle
 * walking: 62^7 is about 0.8 * 2^42, so about 1.25 rounds of the network per code on average. The key is fixed
 * for the life of a deployment: changing it would map future ids onto codes already issued.
 */

const CODE_LENGTH = 7;
export const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 62^7 = 3,521,614,606,208 ids: about 96 years at 100M creates a day. */
export const ID_SPACE = 62 ** CODE_LENGTH;
export const GENERATED_CODE = /^[0-9A-Za-z]{7}$/;
/** Custom aliases: 8 or more characters keeps them out of the 7-character generated space. */
export const ALIAS = /^[A-Za-z0-9_-]{8,64}$/;

const HALF_BITS = 21;
const HALF = 2 ** HALF_BITS;
const HALF_MASK = HALF - 1;
const ROUND_KEYS = [0x5bd1e995, 0x1b873593, 0xcc9e2d51, 0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f];

/**
 * Paths the application server answers at one segment, which must never be issued as codes (a code equal to one
 * would be shadowed by the route). Only 7-character ones can collide with generated codes.
 */
export const RESERVED_CODES: ReadonlySet<string> = new Set(['healthz', 'metrics']);

/** The round function: any function makes a Feistel network a bijection; this one mixes well and is cheap. */
function round(half: number, key: number): number {
  let h = Math.imul(half ^ key, 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca77);
  h ^= h >>> 13;
  return h & HALF_MASK;
}

function feistel(x: number): number {
  let left = Math.floor(x / HALF);
  let right = x % HALF;
  for (const key of ROUND_KEYS) {
    const next = left ^ round(right, key);
    left = right;
    right = next;
  }
  return left * HALF + right;
}

function feistelInverse(y: number): number {
  let left = Math.floor(y / HALF);
  let right = y % HALF;
  for (let i = ROUND_KEYS.length - 1; i >= 0; i--) {
    const previous = right ^ round(left, ROUND_KEYS[i]!);
    right = left;
    left = previous;
  }
  return left * HALF + right;
}

function checkId(x: number): void {
  if (!Number.isSafeInteger(x) || x < 0 || x >= ID_SPACE) throw new RangeError(`id ${x} is outside [0, 62^7)`);
}

/** A bijection of [0, 62^7). */
export function permute(id: number): number {
  checkId(id);
  let y = feistel(id);
  while (y >= ID_SPACE) y = feistel(y);
  return y;
}

export function unpermute(value: number): number {
  checkId(value);
  let x = feistelInverse(value);
  while (x >= ID_SPACE) x = feistelInverse(x);
  return x;
}

/** Exactly 7 base62 characters (leading "0"s included). */
export function encodeBase62(value: number): string {
  checkId(value);
  let out = '';
  for (let i = 0; i < CODE_LENGTH; i++) {
    out = ALPHABET[value % 62]! + out;
    value = Math.floor(value / 62);
  }
  return out;
}

export function decodeBase62(code: string): number {
  if (!GENERATED_CODE.test(code)) throw new RangeError(`${JSON.stringify(code)} is not 7 base62 characters`);
  let value = 0;
  for (const ch of code) value = value * 62 + ALPHABET.indexOf(ch);
  return value;
}

/** The code of an allocator id; null when that code is reserved (the id is skipped, never issued). */
export function codeForId(id: number): string | null {
  const code = encodeBase62(permute(id));
  return RESERVED_CODES.has(code) ? null : code;
}

/** The allocator id a generated code came from. */
export function idForCode(code: string): number {
  return unpermute(decodeBase62(code));
}
