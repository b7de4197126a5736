import t from 'tap';
import type { PeerAddress } from '@raftkit/http';
import { shardFor, storeTopology } from '../../src/workers/store/client.js';
import { regionSyncMs } from '../../src/workers/store/worker.js';

const peer = (id: string, role: string, n: number): PeerAddress => ({
  id,
  role,
  httpAddress: `127.0.0.1:${9000 + n}`,
  tcpAddress: `127.0.0.1:${9100 + n}`,
});
const workers = (stores: number, checks = 3): PeerAddress[] => [
  ...Array.from({ length: stores }, (_, i) => peer(`store${i + 1}`, 'store', i)),
  ...Array.from({ length: checks }, (_, i) => peer(`check${i + 1}`, 'check', 50 + i)),
];

t.test('one region by default: every store is a shard of it', async (t) => {
  const top = storeTopology(workers(2), {});
  t.equal(top.regions, 1);
  t.same(
    top.storesOf(1).map((s) => s.id),
    ['store1', 'store2'],
  );
  t.same(
    top.globalStores.map((s) => s.id),
    ['store1', 'store2'],
  );
  t.equal(top.regionOfCheck(3), 1);
});

t.test('store i belongs to region ((i - 1) % R) + 1; checks are spread the same way', async (t) => {
  const top = storeTopology(workers(6), { regions: '3' });
  t.same(
    top.storesOf(1).map((s) => s.id),
    ['store1', 'store4'],
  );
  t.same(
    top.storesOf(2).map((s) => s.id),
    ['store2', 'store5'],
  );
  t.same(
    top.storesOf(3).map((s) => s.id),
    ['store3', 'store6'],
  );
  t.same(top.globalStores, top.storesOf(1), "strict rules use region 1's stores");
  t.same(
    [1, 2, 3, 4, 5].map((i) => top.regionOfCheck(i)),
    [1, 2, 3, 1, 2],
  );
  t.throws(() => top.storesOf(4), RangeError);
});

t.test('settings that cannot work are refused with a message', async (t) => {
  t.throws(() => storeTopology(workers(3), { regions: '2' }), /cannot be split evenly/);
  t.throws(() => storeTopology(workers(0), {}), /cannot be split evenly/);
  t.throws(() => storeTopology(workers(2), { regions: 'two' }), /regions must be an integer/);
  t.throws(() => storeTopology(workers(2), { regions: '0' }), /regions must be an integer/);
  t.equal(regionSyncMs({}), 1000);
  t.equal(regionSyncMs({ region_sync_ms: '5000' }), 5000);
  t.throws(() => regionSyncMs({ region_sync_ms: '999' }), /1000 to 5000/);
  t.throws(() => regionSyncMs({ region_sync_ms: '5001' }), /1000 to 5000/);
});

t.test('shardFor: one tenant always maps to the same shard index, in every region', async (t) => {
  const top = storeTopology(workers(6), { regions: '3' });
  const tenants = Array.from({ length: 200 }, (_, i) => `tenant-${i}`);
  for (const tenant of tenants) {
    const shards = [1, 2, 3].map((r) => top.storesOf(r).indexOf(shardFor(top.storesOf(r), tenant)));
    if (new Set(shards).size !== 1) t.fail(`${tenant} on shards ${shards.join(',')}`);
  }
  const onFirst = tenants.filter((tenant) => shardFor(top.storesOf(1), tenant).id === 'store1').length;
  t.ok(onFirst > 70 && onFirst < 130, `200 tenants spread over two shards: ${onFirst} on the first`);
  t.throws(() => shardFor([], 'x'), RangeError);
});
