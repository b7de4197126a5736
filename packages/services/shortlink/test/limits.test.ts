/** Create limits: a token bucket per API key and per IP; the tighter one decides; retry times from the bucket. */
import t from 'tap';
import { CreateLimits } from '../src/workers/app/limits.js';

t.test('per key: burst then refill; another key is not affected', async (t) => {
  const limits = new CreateLimits({ capacity: 3, refillRate: 1 }, { capacity: 100, refillRate: 100 });
  for (let i = 0; i < 3; i++) t.match(limits.check('k1', 'ip', 0), { allowed: true, remaining: 2 - i });
  t.same(limits.check('k1', 'ip', 0), { allowed: false, retryAfterMs: 1000, dimension: 'api_key' });
  t.match(limits.check('k2', 'ip', 0), { allowed: true }, 'another key has its own bucket');
  t.same(limits.check('k1', 'ip', 500), { allowed: false, retryAfterMs: 500, dimension: 'api_key' });
  t.match(limits.check('k1', 'ip', 1000), { allowed: true }, 'refilled after a second');
});

t.test('per IP: many keys from one address are held by the IP bucket, and keep their key tokens', async (t) => {
  const limits = new CreateLimits({ capacity: 2, refillRate: 1 }, { capacity: 2, refillRate: 1 });
  t.match(limits.check('a', '10.0.0.1', 0), { allowed: true });
  t.match(limits.check('b', '10.0.0.1', 0), { allowed: true });
  t.same(limits.check('c', '10.0.0.1', 0), { allowed: false, retryAfterMs: 1000, dimension: 'ip' });
  t.match(limits.check('c', '10.0.0.2', 0), { allowed: true }, 'key c did not lose its token to the refusal');
  t.match(limits.check('c', '10.0.0.2', 0), { allowed: true });
  t.match(limits.check('c', '10.0.0.3', 0), { allowed: false, dimension: 'api_key' });
});
