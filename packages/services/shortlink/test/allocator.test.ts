/** The app server's code allocator: ids from leased batches, the next lease fetched at 80%, reserved codes skipped. */
import t from 'tap';
import { CodeAllocator, type Batch } from '../src/workers/app/allocator.js';
import { idForCode, RESERVED_CODES } from '../src/codes.js';

function leaser(size = 10): { lease: () => Promise<Batch>; calls: number } {
  let next = 0;
  const state = {
    calls: 0,
    lease: async (): Promise<Batch> => {
      state.calls++;
      await new Promise((r) => setImmediate(r));
      const batch = { start: next, end: next + size };
      next += size;
      return batch;
    },
  };
  return state;
}

t.test('hands out every id of its batches once, in order, and prefetches the next batch at 80%', async (t) => {
  const l = leaser(10);
  const alloc = new CodeAllocator(l.lease);
  const ids: number[] = [];
  for (let i = 0; i < 8; i++) ids.push(idForCode(await alloc.nextCode()));
  t.equal(l.calls, 2, 'the 8th id (80%) started the second lease');
  for (let i = 0; i < 2; i++) ids.push(idForCode(await alloc.nextCode()));
  await new Promise((r) => setImmediate(r));
  ids.push(idForCode(await alloc.nextCode()));
  t.same(ids, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  t.same(alloc.status().batches, [
    { start: 0, end: 10 },
    { start: 10, end: 20 },
  ]);
  t.equal(alloc.status().issued, 11);
});

t.test('concurrent callers share one lease and never get the same code', async (t) => {
  const l = leaser(1000);
  const alloc = new CodeAllocator(l.lease);
  const codes = await Promise.all(Array.from({ length: 5000 }, () => alloc.nextCode()));
  t.equal(new Set(codes).size, 5000);
  t.ok(l.calls <= 6, `${l.calls} leases for 5,000 codes`);
});

t.test('a failed lease reaches the waiting callers; the next call leases again', async (t) => {
  let fail = true;
  const alloc = new CodeAllocator(async () => {
    if (fail) throw new Error('store down');
    return { start: 0, end: 5 };
  });
  await t.rejects(alloc.nextCode(), /store down/);
  fail = false;
  t.match(await alloc.nextCode(), /^[0-9A-Za-z]{7}$/);
});

t.test('ids whose code is reserved are skipped', async (t) => {
  const reserved = [...RESERVED_CODES].map(idForCode)[0]!;
  const alloc = new CodeAllocator(async () => ({ start: reserved, end: reserved + 2 }));
  const code = await alloc.nextCode();
  t.equal(idForCode(code), reserved + 1, 'the reserved id was passed over');
  t.notOk(RESERVED_CODES.has(code));
});
