/**
 * Hostile input against the single-group services (kv, lock, ratelimit, shortlink), on real processes: every port of every process gets malformed and deeply nested
 * JSON, wrong shapes, oversized bodies, broken HTTP, slowloris and raw garbage; afterwards every process still runs,
 * answers /healthz, and the service still takes a write (helpers/hostile.ts). Split in two files so tap runs them
 * side by side.
 */
import { call } from '@raftkit/testkit';
import { runHostileInput, type ServiceCase } from './helpers/hostile.js';

const cases: ServiceCase[] = [
  {
    service: 'kv',
    write: (c) => call(c.members[0]!, 'PUT', '/v1/kv/after-attack', { token: c.token, body: { value: 'ok' } }),
  },
  {
    service: 'lock',
    write: (c) => call(c.members[0]!, 'POST', '/v1/sessions', { token: c.token, body: { ttl_ms: 10_000 } }),
  },
  {
    service: 'ratelimit',
    workers: 'store=1,check=1',
    write: (c) => call(c.members[0]!, 'PUT', '/v1/tenants/after-attack', { token: c.token, body: {} }),
  },
  {
    service: 'shortlink',
    workers: 'analytics=1,app=1',
    write: (c) =>
      call(c.role('app')[0]!.url, 'POST', '/api/urls', {
        token: c.token,
        body: { long_url: 'https://example.com/after-attack' },
      }),
  },
];

runHostileInput(cases);
