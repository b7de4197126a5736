/** The code permutation and base62: a bijection of [0, 62^7), its inverse, 7 characters, nothing sequential-looking. */
import fc from 'fast-check';
import t from 'tap';

/** A property as one assertion that prints the counterexample when it fails. */
const holds = <T>(
  test: { same(a: unknown, b: unknown, m: string): void },
  property: fc.IProperty<T>,
  params?: fc.Parameters<T>,
) => test.same(fc.check(property, params).counterexample, null, 'property holds');
import {
  codeForId,
  decodeBase62,
  encodeBase62,
  ID_SPACE,
  idForCode,
  permute,
  RESERVED_CODES,
  unpermute,
} from '../src/codes.js';

const id = fc.integer({ min: 0, max: ID_SPACE - 1 });

t.test('unpermute(permute(x)) = x and permute(unpermute(y)) = y, inside [0, 62^7)', async (t) => {
  holds(
    t,
    fc.property(id, (x) => {
      const y = permute(x);
      return y >= 0 && y < ID_SPACE && unpermute(y) === x && permute(unpermute(x)) === x;
    }),
    { numRuns: 20_000 },
  );
  for (const edge of [0, 1, ID_SPACE - 2, ID_SPACE - 1]) t.equal(unpermute(permute(edge)), edge, `edge id ${edge}`);
});

t.test(
  'bijective on samples: 200,000 consecutive ids (and a far range) give 200,000 distinct codes of 7 base62 characters',
  async (t) => {
    for (const start of [0, 1_234_567_890_123]) {
      const codes = new Set<string>();
      for (let i = start; i < start + 100_000; i++) {
        const code = encodeBase62(permute(i));
        if (!/^[0-9A-Za-z]{7}$/.test(code)) t.fail(`bad code ${code}`);
        codes.add(code);
      }
      t.equal(codes.size, 100_000, `distinct codes from ${start}`);
    }
  },
);

t.test('base62 round-trips with exactly 7 characters, zero-padded', async (t) => {
  t.equal(encodeBase62(0), '0000000');
  t.equal(encodeBase62(61), '000000z');
  t.equal(encodeBase62(ID_SPACE - 1), 'zzzzzzz');
  holds(
    t,
    fc.property(id, (x) => decodeBase62(encodeBase62(x)) === x && encodeBase62(x).length === 7),
  );
  t.throws(() => encodeBase62(ID_SPACE));
  t.throws(() => encodeBase62(-1));
  t.throws(() => decodeBase62('abc'));
  t.throws(() => decodeBase62('abc_def'));
});

t.test('codes of consecutive ids do not look sequential', async (t) => {
  // Consecutive ids land far apart: the median distance between neighbours' values is a sizeable part of the space.
  const gaps: number[] = [];
  for (let i = 0; i < 10_000; i++) gaps.push(Math.abs(permute(i + 1) - permute(i)));
  gaps.sort((a, b) => a - b);
  t.ok(gaps[5_000]! > ID_SPACE / 10, `median gap ${gaps[5_000]} is over a tenth of the space`);
  // No shared 4-character prefix between most neighbours (a counter would share 6 of 7 characters).
  let sharedPrefix = 0;
  for (let i = 0; i < 10_000; i++) if (codeForId(i)?.slice(0, 4) === codeForId(i + 1)?.slice(0, 4)) sharedPrefix++;
  t.ok(sharedPrefix < 10, `${sharedPrefix} of 10,000 neighbours share a 4-character prefix`);
  // Each output character position is near-uniform over the alphabet.
  const counts = new Array<number>(62).fill(0);
  for (let i = 0; i < 62_000; i++) counts[decodeBase62(codeForId(i) ?? '0000000') % 62]!++;
  t.ok(Math.min(...counts) > 800 && Math.max(...counts) < 1200, 'last character near-uniform');
});

t.test('reserved codes are never issued: their ids map to null, and every other id to its code', async (t) => {
  for (const code of RESERVED_CODES) {
    const reservedId = idForCode(code);
    t.equal(codeForId(reservedId), null, `${code} (id ${reservedId}) is skipped`);
  }
  holds(
    t,
    fc.property(id, (x) => {
      const code = codeForId(x);
      return code === null ? RESERVED_CODES.has(encodeBase62(permute(x))) : idForCode(code) === x;
    }),
  );
});
