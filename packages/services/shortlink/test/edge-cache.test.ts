import fc from 'fast-check';
import t from 'tap';
import type { LinkRecord } from '../src/members/api.js';
import { EdgeCache, MISSING } from '../src/workers/app/edge-cache.js';

const link = (code: string, expiresAt = Date.now() + 3_600_000): LinkRecord =>
  ({
    short_code: code,
    long_url: `https://example.com/${code}`,
    created_at: 0,
    expires_at: expiresAt,
    created_by: 'u',
    alias: false,
  }) as LinkRecord;
/** A clock the test moves itself: a loaded machine's pauses cannot age an entry between two lines. */
function manualClock(): { clock: () => number; advance: (ms: number) => void } {
  let now = 0;
  return { clock: () => now, advance: (ms) => (now += ms) };
}

t.test('entries end after their TTL: the edge TTL for links, the negative TTL for misses', async (t) => {
  const time = manualClock();
  const cache = new EdgeCache({ ttlMs: 80, negativeTtlMs: 20, max: 100, clock: time.clock });
  const a = link('aaaaaaa');
  cache.set('aaaaaaa', a, Date.now());
  cache.set('bbbbbbb', MISSING, Date.now());
  t.equal(cache.get('aaaaaaa'), a);
  t.equal(cache.get('bbbbbbb'), MISSING);
  time.advance(20);
  t.equal(cache.get('bbbbbbb'), MISSING, 'the miss is kept for its whole negative TTL');
  time.advance(20);
  t.equal(cache.get('bbbbbbb'), undefined, 'the miss is forgotten after the negative TTL');
  t.equal(cache.get('aaaaaaa'), a, 'the link is still there');
  time.advance(60);
  t.equal(cache.get('aaaaaaa'), undefined, 'the link is gone after the edge TTL');
});

t.test('a link about to expire is not cached; one expiring soon is cached until 1 s before', async (t) => {
  const time = manualClock();
  const cache = new EdgeCache({ ttlMs: 60_000, negativeTtlMs: 1_000, max: 100, clock: time.clock });
  const now = Date.now();
  cache.set('aaaaaaa', link('aaaaaaa'), now);
  cache.set('aaaaaaa', link('aaaaaaa', now + 500), now);
  t.equal(cache.get('aaaaaaa'), undefined, 'the new, short-lived answer replaced the old one and was not kept');
  cache.set('ccccccc', link('ccccccc', now + 1_030), now);
  t.ok(cache.get('ccccccc'));
  time.advance(29);
  t.ok(cache.get('ccccccc'), 'kept until 1 s before its expiry');
  time.advance(2);
  t.equal(cache.get('ccccccc'), undefined, 'gone 1 s before its expiry');
});

t.test('deleted() remembers the code as missing for a full edge TTL, over a cached link', async (t) => {
  const time = manualClock();
  const cache = new EdgeCache({ ttlMs: 60_000, negativeTtlMs: 1, max: 100, clock: time.clock });
  cache.set('aaaaaaa', link('aaaaaaa'), Date.now());
  cache.deleted('aaaaaaa');
  time.advance(59_999);
  t.equal(cache.get('aaaaaaa'), MISSING);
});

t.test('at most max entries, and every code used within the last max/2 distinct codes is kept', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.array(fc.tuple(fc.boolean(), fc.nat(30)), { maxLength: 300 }),
      (max, ops) => {
        const cache = new EdgeCache({ ttlMs: 60_000, negativeTtlMs: 60_000, max });
        const recent: string[] = [];
        const links = new Map<string, LinkRecord>();
        for (const [isSet, n] of ops) {
          const code = `code${String(n).padStart(3, '0')}`;
          if (isSet) {
            const l = link(code);
            links.set(code, l);
            cache.set(code, l, Date.now());
          } else {
            const found = cache.get(code);
            // Never a wrong answer: what is there is the last link set for that code.
            if (found !== undefined && found !== links.get(code)) return false;
            if (found === undefined) continue;
          }
          const at = recent.indexOf(code);
          if (at >= 0) recent.splice(at, 1);
          recent.push(code);
          if (cache.size > max) return false;
        }
        // The most recently used floor(max/2) distinct codes are all still there.
        const keep = recent.slice(-Math.max(1, Math.floor(max / 2)));
        return keep.every((code) => cache.get(code) === links.get(code));
      },
    ),
  );
  t.pass();
});
