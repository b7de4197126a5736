/**
 * Hostile input against the services on Raft groups (collab, flash, auction), on real processes: every port of every process gets malformed and deeply nested
 * JSON, wrong shapes, oversized bodies, broken HTTP, slowloris and raw garbage; afterwards every process still runs,
 * answers /healthz, and the service still takes a write (helpers/hostile.ts). Split in two files so tap runs them
 * side by side.
 */
import { call } from '@raftkit/testkit';
import { runHostileInput, type ServiceCase } from './helpers/hostile.js';

const cases: ServiceCase[] = [
  {
    service: 'collab',
    workers: 'worker=1',
    write: (c) =>
      call(c.role('worker')[0]!.url, 'POST', '/api/docs', {
        token: c.token,
        body: { title: 'after attack', owner_id: 'alice' },
      }),
  },
  {
    service: 'flash',
    workers: 'gateway=1',
    write: (c) => {
      const now = Date.now();
      return call(c.role('gateway')[0]!.url, 'POST', '/api/flash/deals', {
        token: c.token,
        body: {
          sku_id: 'after-attack',
          total_inventory: 10,
          start_at: now + 600_000,
          end_at: now + 1_200_000,
          shards: 2,
        },
      });
    },
  },
  {
    service: 'auction',
    workers: 'gateway=1,checkout=1',
    write: (c) => {
      const now = Date.now();
      return call(c.role('gateway')[0]!.url, 'POST', '/api/auctions', {
        token: c.token,
        body: {
          item_id: 'after-attack',
          seller_id: 's1',
          start_price: 100,
          start_at: now,
          end_at: now + 600_000,
          anti_snipe_window_s: 60,
        },
      });
    },
  },
];

runHostileInput(cases);
