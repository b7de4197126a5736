import fc from 'fast-check';
import t from 'tap';
import { CounterCache } from '../../src/workers/clicks/counter-cache.js';

t.test('a value read back is the last one set, and recently used counters survive newer ones', async (t) => {
  const cache = new CounterCache(4);
  cache.set('a', 1);
  cache.set('b', 2);
  cache.set('a', 3);
  t.equal(cache.get('a'), 3);
  cache.set('c', 4); // the young generation (2) is full: a, b age
  t.equal(cache.get('a'), 3, 'reading an aged counter keeps it');
  cache.set('d', 5);
  cache.set('e', 6); // b was not used since it aged: dropped
  t.equal(cache.get('b'), undefined);
  t.equal(cache.get('e'), 6);
  cache.clear();
  t.equal(cache.get('e'), undefined);
});

t.test('never holds more than its capacity, and never answers a wrong value', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20 }),
      fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 30 })), { maxLength: 300 }),
      (capacity, ops) => {
        const cache = new CounterCache(capacity);
        const truth = new Map<string, number>();
        ops.forEach(([write, k], i) => {
          const key = `k${k}`;
          if (write) {
            cache.set(key, i);
            truth.set(key, i);
          } else {
            const got = cache.get(key);
            if (got !== undefined && got !== truth.get(key)) throw new Error(`${key}: ${got} != ${truth.get(key)}`);
          }
          const size = [...truth.keys()].filter((k2) => peek(cache, k2)).length;
          if (size > capacity) throw new Error(`holds ${size} > ${capacity}`);
        });
      },
    ),
  );
  t.pass('bounded and exact');
});

/** Whether a key is held, without the promotion a get does. */
function peek(cache: CounterCache, key: string): boolean {
  const generations = cache as unknown as { young: Map<string, number>; old: Map<string, number> };
  return generations.young.has(key) || generations.old.has(key);
}
