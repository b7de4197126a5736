/**
 * The transcoder's split of failures (src/workers/pipeline/transient.ts): a store that is down, restarting or
 * answering 5xx is retried; a fault of the video's own is not. Real sockets: a refused port, then a store that comes
 * up while the step is being retried.
 */
import { createServer } from 'node:http';
import t from 'tap';
import { HttpError, unavailable } from '@raftkit/http';
import { freePort } from '@raftkit/testkit';
import { StoreClient } from '../src/internal-client.js';
import { isTransient, retryTransient } from '../src/workers/pipeline/transient.js';

t.test('what is transient', async (t) => {
  t.ok(isTransient(unavailable('the object stores are unreachable', 1)), '503 unavailable');
  t.ok(isTransient(new HttpError(503, 'replicas_unavailable', '1 of 3 replicas')), '503 replicas_unavailable');
  t.ok(isTransient(new HttpError(502, 'upstream_error', 'the object store answered 500')), '5xx');
  t.ok(isTransient(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })), 'a cut connection');
  t.ok(isTransient(new Error('fetch failed', { cause: { code: 'ECONNREFUSED' } })), 'a refusal as the cause');
  t.notOk(isTransient(new HttpError(400, 'invalid', 'bad key')), 'a 4xx');
  t.notOk(isTransient(new Error('ffmpeg exited 1: Invalid data found when processing input')), 'a bad source');
  t.notOk(isTransient(new Error('the raw source is missing from the store')), 'a source no store has');
});

t.test('a step against a store that is down is retried until the store is up', async (t) => {
  const port = await freePort();
  const store = new StoreClient(`http://127.0.0.1:${port}`, 'token');
  t.teardown(() => store.close());
  const refused = await store.put('videos/v1/r1/144p/init.mp4', 'x').catch((e: unknown) => e);
  t.ok(isTransient(refused), `a refused connection is transient (${String(refused)})`);

  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end(JSON.stringify({ key: 'videos/v1/r1/144p/init.mp4', size: 1, sha256: 'ab' })));
  });
  t.teardown(() => server.close());
  // The store comes back 600 ms into the retries.
  setTimeout(() => server.listen(port, '127.0.0.1'), 600);
  let retries = 0;
  const answer = await retryTransient(
    () => store.put('videos/v1/r1/144p/init.mp4', 'x'),
    Date.now() + 10_000,
    () => retries++,
  );
  t.equal(answer.size, 1);
  t.ok(retries >= 1, `retried ${retries} times`);

  // Past the deadline the last error is thrown (the transcoder then releases the task); a permanent one at once.
  await t.rejects(
    retryTransient(() => Promise.reject(unavailable('still down', 1)), Date.now() + 300),
    /still down/,
  );
  let calls = 0;
  await t.rejects(
    retryTransient(() => {
      calls++;
      return Promise.reject(new Error('ffmpeg exited 1'));
    }, Date.now() + 10_000),
    /ffmpeg/,
  );
  t.equal(calls, 1, 'a permanent failure is not retried');
});
