/**
 * The gateway's cache of verified tokens: bounded, least recently used out first, keyed by the exact token string.
 * (That a tampered or another user's token is still refused while a good one is cached is checked on a real
 * cluster in cluster.test.ts, "the token caches".)
 */
import t from 'tap';
import { TokenCache } from '../src/workers/gateway/token-cache.js';

t.test('holds at most its capacity; the least recently used entry goes first', async (t) => {
  const cache = new TokenCache<number>(3);
  cache.set('a', 1);
  cache.set('b', 2);
  cache.set('c', 3);
  t.equal(cache.size, 3);
  t.equal(cache.get('a'), 1, 'a hit makes a the most recently used');
  cache.set('d', 4);
  t.equal(cache.size, 3, 'never above the capacity');
  t.equal(cache.get('b'), undefined, 'b, the least recently used, was evicted');
  t.same([cache.get('a'), cache.get('c'), cache.get('d')], [1, 3, 4]);
  cache.set('c', 30);
  t.equal(cache.size, 3, 'replacing an entry does not grow the cache');
  t.equal(cache.get('c'), 30);
  for (let i = 0; i < 1_000; i++) cache.set(`t${i}`, i);
  t.equal(cache.size, 3, 'a flood of distinct tokens stays bounded');
  t.same([cache.get('t997'), cache.get('t998'), cache.get('t999')], [997, 998, 999], 'the newest are kept');
  t.equal(cache.get('a'), undefined);
});

t.test('keyed by the whole string: a token differing in one character misses', async (t) => {
  const cache = new TokenCache<string>(10);
  cache.set('b1.1700000000000.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef', 'u1');
  t.equal(cache.get('b1.1700000000000.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef'), 'u1');
  t.equal(cache.get('b1.1700000000000.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdeg'), undefined, 'the last character changed');
  t.equal(cache.get('b1.1700000000000.ABCDEFGHIJKLMNOPQRSTUVWXYZabcde'), undefined, 'a prefix');
  t.equal(cache.has('b1.1700000000000.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef'), true);
});

t.test('a capacity must be a positive integer', async (t) => {
  t.throws(() => new TokenCache(0), RangeError);
  t.throws(() => new TokenCache(1.5), RangeError);
});
