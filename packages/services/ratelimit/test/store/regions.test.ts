/**
 * Regions as real store processes (one store per region): drive more than the limit at one key in every region
 * and measure what all regions together admit against the true limit.
 */
import t from 'tap';
import { StoreClient, storeTopology, type CounterOp } from '../../src/workers/store/client.js';
import { startStores } from './helpers/stores.js';

interface Drive {
  admitted: number[];
  seconds: number;
}

/** Sends `perSecond[r]` takes a second at `op` to region r + 1's store for `seconds`, counting admissions. */
async function drive(clients: StoreClient[], op: CounterOp, perSecond: number[], seconds: number): Promise<Drive> {
  const tickMs = 50;
  const admitted = clients.map(() => 0);
  const started = Date.now();
  const pending: Promise<void>[] = [];
  let tick = 0;
  while (Date.now() - started < seconds * 1000) {
    tick++;
    for (const [r, client] of clients.entries()) {
      // Spread each region's rate evenly over the ticks, carrying the fractions.
      const due =
        Math.floor((tick * perSecond[r]! * tickMs) / 1000) - Math.floor(((tick - 1) * perSecond[r]! * tickMs) / 1000);
      for (let i = 0; i < due; i++)
        pending.push(client.take([op]).then(([res]) => void (admitted[r]! += res!.allowed ? 1 : 0)));
    }
    await new Promise((resolve) => setTimeout(resolve, started + tick * tickMs - Date.now()));
  }
  await Promise.all(pending);
  return { admitted, seconds: (Date.now() - started) / 1000 };
}

async function regionClients(t: Tap, regions: number, settings: Record<string, string>): Promise<StoreClient[]> {
  const group = await startStores(regions, { regions: String(regions), ...settings });
  const topology = storeTopology(group.stores, { regions: String(regions) });
  const clients = Array.from(
    { length: regions },
    (_, r) =>
      new StoreClient({ address: topology.storesOf(r + 1)[0]!.tcpAddress!, token: group.token, timeoutMs: 2_000 }),
  );
  t.teardown(async () => {
    for (const c of clients) c.close();
    await group.stop();
  });
  return clients;
}

interface Tap {
  teardown(fn: () => unknown): void;
}

t.test(
  "sync mode, 3 regions: over-admission within sync_interval * rate * regions (+ each extra region's first burst)",
  async (t) => {
    const regions = 3;
    const syncMs = 1000;
    const capacity = 20;
    const rate = 20;
    const clients = await regionClients(t, regions, { region_sync_ms: String(syncMs) });
    const op: CounterOp = { key: 'acme:/api:ip:10.0.0.1', capacity, refillRate: rate };
    const { admitted, seconds } = await drive(clients, op, [60, 60, 60], 10);
    const total = admitted.reduce((a, b) => a + b, 0);
    const limit = capacity + rate * seconds;
    const over = total - limit;
    // The bound: each region can admit up to one sync interval of the rate before it hears of the others' takes,
    // and every counter starts full, so each region beyond the first adds one capacity of burst at the start.
    const bound = (syncMs / 1000) * rate * regions + (regions - 1) * capacity;
    console.log(
      `# regions=${regions} sync=${syncMs}ms capacity=${capacity} rate=${rate}/s demand=3x60/s over ${seconds.toFixed(1)}s: admitted ${total} (per region ${admitted.join('/')}), limit ${limit.toFixed(0)}, over-admission ${over.toFixed(0)} (${((over / limit) * 100).toFixed(1)}%), bound ${bound}`,
    );
    t.ok(over <= bound, `over-admission ${over.toFixed(0)} <= ${bound}`);
    t.ok(total >= rate * seconds * 0.8, `the regions together still admit about the limit (${total})`);
    t.ok(
      admitted.every((a) => a > 0),
      'every region admitted some',
    );
  },
);

t.test('budget mode, 2 regions with 3:1 traffic: each region gets its traffic share of the limit', async (t) => {
  const regions = 2;
  const syncMs = 1000;
  const capacity = 10;
  const rate = 20;
  const clients = await regionClients(t, regions, { region_sync_ms: String(syncMs) });
  const op: CounterOp = { key: 'acme:/api:api_key:k1', capacity, refillRate: rate, mode: 'budget' };
  const { admitted, seconds } = await drive(clients, op, [90, 30], 8);
  const total = admitted.reduce((a, b) => a + b, 0);
  const limit = capacity + rate * seconds;
  // Shares are learnt from the syncs: equal for the first interval or two, then in proportion to demand.
  const bound = (syncMs / 1000) * rate * regions + (regions - 1) * capacity;
  console.log(
    `# budget: regions=${regions} demand 90/s and 30/s, capacity=${capacity} rate=${rate}/s over ${seconds.toFixed(1)}s: admitted ${admitted.join('/')} = ${total}, limit ${limit.toFixed(0)}, bound ${(limit + bound).toFixed(0)}`,
  );
  t.ok(total - limit <= bound, `over-admission ${(total - limit).toFixed(0)} <= ${bound}`);
  t.ok(admitted[0]! > 1.8 * admitted[1]!, `the busier region got the larger budget (${admitted[0]} vs ${admitted[1]})`);
});
