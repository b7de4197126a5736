/**
 * The kv machine's detached snapshot: the map as of the call, whatever applies while it is read, in slices that
 * restore gives back whole; and snapshots of the one-array format (before slices) still restore.
 */
import t from 'tap';
import { Packr } from 'msgpackr';
import { KvMachine } from '../src/machine.js';

function filled(n: number): KvMachine {
  const m = new KvMachine();
  for (let i = 0; i < n; i++) m.apply({ op: 'put', key: `k${i}`, value: `v${i}` }, { index: i + 1, term: 1, time: 1 });
  return m;
}

async function read(chunks: AsyncIterable<Uint8Array>): Promise<{ bytes: Buffer; count: number }> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return { bytes: Buffer.concat(parts), count: parts.length };
}

t.test('a detached snapshot holds the map as of the call, not the commands applied while it is read', async (t) => {
  const n = 10_000; // over two slices of 4,096 pairs
  const m = filled(n);
  const chunks = m.detachedSnapshot()[Symbol.asyncIterator]();
  // Changes after the call, before and between reads of the chunks: none of them may show.
  m.apply({ op: 'put', key: 'k0', value: 'changed' }, { index: n + 1, term: 1, time: 1 });
  m.apply({ op: 'delete', key: 'k1' }, { index: n + 2, term: 1, time: 1 });
  const parts: Uint8Array[] = [];
  for (let r = await chunks.next(); r.done !== true; r = await chunks.next()) {
    parts.push(r.value);
    m.apply({ op: 'put', key: `late${parts.length}`, value: 'x' }, { index: n + 2 + parts.length, term: 1, time: 1 });
  }
  t.equal(parts.length, 3, 'three slices for 10,000 pairs');
  const restored = new KvMachine();
  restored.restore(Buffer.concat(parts));
  t.equal(restored.size, n);
  t.same(restored.get('k0'), { value: 'v0', revision: 1 }, 'the put after the call is not in it');
  t.same(restored.get('k1'), { value: 'v1', revision: 2 }, 'nor the delete');
  t.equal(restored.get('late1'), undefined, 'nor what applied between slices');
  t.same(restored.get(`k${n - 1}`), { value: `v${n - 1}`, revision: n });
  t.equal(m.get('k0')?.value, 'changed', 'the live map did change');
});

t.test('the one-buffer snapshot and an empty map restore too', async (t) => {
  const m = filled(50);
  const again = new KvMachine();
  again.restore(m.snapshot());
  t.equal(again.size, 50);
  t.same(again.get('k49'), { value: 'v49', revision: 50 });
  // The format before slices: one packed array of [key, entry] pairs.
  const old = new Packr({ useRecords: false }).pack([['a', { value: 'x', revision: 3 }]]);
  again.restore(old);
  t.equal(again.size, 1);
  t.same(again.get('a'), { value: 'x', revision: 3 });
  const empty = await read(new KvMachine().detachedSnapshot());
  t.equal(empty.count, 0, 'an empty map has no slices');
  again.restore(empty.bytes);
  t.equal(again.size, 0);
});
