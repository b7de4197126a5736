/** App server settings: defaults, overrides, and a clear refusal of malformed values (create_batch_max included). */
import t from 'tap';
import { appSettings, unknownSettings } from '../src/workers/app/settings.js';

t.test('defaults and overrides', async (t) => {
  const d = appSettings({}, '127.0.0.1:7643');
  t.match(d, {
    publicUrl: 'http://127.0.0.1:7643',
    edgeTtlMs: 5000,
    createBatchMax: 256,
    perKey: { refillRate: 10, capacity: 100 },
  });
  t.match(appSettings({ create_batch_max: '1', public_url: 'https://s.example/' }, 'x:1'), {
    createBatchMax: 1,
    publicUrl: 'https://s.example',
  });
  t.equal(appSettings({ create_batch_max: '1000' }, 'x:1').createBatchMax, 1000);
});

t.test('malformed values stop the server with the key named', async (t) => {
  for (const v of ['0', '1001', '2.5', 'many', ''])
    t.throws(() => appSettings({ create_batch_max: v }, 'x:1'), /create_batch_max/, JSON.stringify(v));
  t.throws(() => appSettings({ edge_cache_ttl_ms: '-5' }, 'x:1'), /edge_cache_ttl_ms/);
  t.same(unknownSettings({ create_batch_max: '5', stream_buffer: '9' }), ['stream_buffer']);
});
