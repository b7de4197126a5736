// The delivery tier on real processes: a regional cache and two edges (each its own node process, real sockets,
// real disk) in front of a counting origin (an HTTP server in this test that counts every fetch per key). One
// set of processes for every case.
import { createServer, request as httpRequest, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Agent, request } from 'undici';
import { deriveClientToken } from '@raftkit/http';
import { call, freePort, reservePorts, until, type PortRange } from '@raftkit/testkit';
import { spawnTier, type TierChild, type TierStats } from '../src/workers/delivery/index.js';

const TOKEN = 'delivery-test-cluster-token';

/** The origin: objects by key, a fetch counter per key, a delay (so concurrent misses overlap) and a hang switch. */
class CountingOrigin {
  readonly objects = new Map<string, Buffer>();
  readonly fetches = new Map<string, number>();
  delayMs = 400;
  hang = false;
  private server: Server | null = null;
  port = 0;

  async start(port: number): Promise<void> {
    this.port = port;
    this.server = createServer((req, res) => {
      const key = decodeURIComponent((req.url ?? '').replace(/^\/objects\//, ''));
      if (req.headers.authorization !== `Bearer ${TOKEN}`) {
        res.writeHead(401).end();
        return;
      }
      this.fetches.set(key, (this.fetches.get(key) ?? 0) + 1);
      if (this.hang) return; // never answers: the tiers must time out
      setTimeout(() => {
        const body = this.objects.get(key);
        if (body === undefined)
          res
            .writeHead(404, { 'content-type': 'application/json' })
            .end('{"error":{"code":"not_found","message":"no such object"}}');
        else res.writeHead(200, { 'content-length': body.length }).end(body);
      }, this.delayMs);
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (s === null) return;
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }

  count(key: string): number {
    return this.fetches.get(key) ?? 0;
  }
}

type Tier = TierChild;

let ports: PortRange;
let dir: string;
const origin = new CountingOrigin();
const tiers: Tier[] = [];
let regional: Tier;
let edge1: Tier;
let edge2: Tier;
const stampedeAgent = new Agent({ connections: 1100, keepAliveTimeout: 10_000 });

async function startTier(
  id: string,
  kind: 'edge' | 'regional',
  port: number,
  upstreamUrl: string,
  downstream: Array<{ id: string; url: string }>,
  settings: Record<string, string>,
): Promise<Tier> {
  // No metadata members here: the tiers stand in front of this test's origin (the published check is the pipeline
  // test's, on a real cluster); they still serve nothing outside videos/.
  const tier = await spawnTier({
    id,
    kind,
    httpAddress: `127.0.0.1:${port}`,
    dataDir: join(dir, id),
    token: TOKEN,
    upstreamUrl,
    downstream,
    settings: { publish_check: 'off', ...settings },
  });
  tiers.push(tier);
  return tier;
}

async function stats(tier: Tier): Promise<TierStats> {
  const answer = await call(tier.url, 'GET', '/api/delivery/stats', { token: TOKEN });
  return answer.body as unknown as TierStats;
}

/** A raw GET with the path sent exactly as written (no client-side normalisation of `..`). */
function rawGet(base: string, path: string, method = 'GET'): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path, method }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function getMedia(tier: Tier, key: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') {
  const res = await request(`${tier.url}/media/${key}`, {
    method,
    headers,
    dispatcher: stampedeAgent,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

function segmentBytes(label: string, size: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31 + label.length * 7 + label.charCodeAt(i % label.length)) & 0xff;
  return b;
}

t.before(async () => {
  ports = await reservePorts();
  dir = mkdtempSync(join(tmpdir(), 'video-delivery-test-'));
  await origin.start(await freePort());
  const originUrl = `http://127.0.0.1:${origin.port}/objects`;
  const [pr, p1, p2] = [ports.base + 41, ports.base + 42, ports.base + 43];
  const edges = [
    { id: 'edge1', url: `http://127.0.0.1:${p1}` },
    { id: 'edge2', url: `http://127.0.0.1:${p2}` },
  ];
  // The regional tier gives up on the origin before an edge gives up on the regional tier, so a hung origin
  // reaches the viewer as the regional tier's 504, passed through.
  regional = await startTier('regional1', 'regional', pr, originUrl, edges, { upstream_timeout_ms: '2000' });
  edge1 = await startTier('edge1', 'edge', p1, `${regional.url}/media`, [], { upstream_timeout_ms: '8000' });
  edge2 = await startTier('edge2', 'edge', p2, `${regional.url}/media`, [], { upstream_timeout_ms: '8000' });
});

t.teardown(async () => {
  await Promise.all(tiers.map((tier) => tier.stop()));
  await origin.stop();
  await stampedeAgent.close();
  rmSync(dir, { recursive: true, force: true });
  ports.release();
});

t.test('1,000 simultaneous requests of a new segment: one fetch per tier, one origin fetch', async (t) => {
  const key = 'videos/vstampede/r1/hls/720p/seg_00000.m4s';
  const bytes = segmentBytes('stampede', 200_000);
  origin.objects.set(key, bytes);
  origin.delayMs = 1500;
  const [before1, beforeR] = [await stats(edge1), await stats(regional)];
  const answers = await Promise.all(Array.from({ length: 1000 }, () => getMedia(edge1, key)));
  origin.delayMs = 400;
  t.ok(
    answers.every((a) => a.status === 200 && a.body.equals(bytes)),
    'every request got the whole segment',
  );
  t.equal(origin.count(key), 1, 'the origin was fetched once');
  const [after1, afterR] = [await stats(edge1), await stats(regional)];
  t.equal(after1.upstreamFetches - before1.upstreamFetches, 1, 'the edge fetched from the regional tier once');
  t.equal(afterR.upstreamFetches - beforeR.upstreamFetches, 1, 'the regional tier fetched from the origin once');
  t.equal(after1.requests - before1.requests, 1000, 'the edge saw the 1,000 requests');
  t.ok(
    after1.coalesced - before1.coalesced >= 500,
    `most requests waited on the one fetch (${after1.coalesced - before1.coalesced} coalesced)`,
  );
  const outcomes = new Set(answers.map((a) => String(a.headers['x-cache']).split(' ')[0]));
  t.ok(outcomes.has('MISS') && outcomes.has('COALESCED'), `x-cache names the outcomes: ${[...outcomes].join(', ')}`);
  const metrics = await call(edge1.url, 'GET', '/metrics');
  t.match(
    String(metrics.body['text']),
    /video_cache_upstream_fetches_total\{result="ok"\} \d+/,
    'the fetch count is in /metrics',
  );
});

t.test(
  'a stampede split over two edges: the regional tier coalesces the edges, the origin is fetched once',
  async (t) => {
    const key = 'videos/vsplit/r1/hls/360p/seg_00004.m4s';
    const bytes = segmentBytes('split', 50_000);
    origin.objects.set(key, bytes);
    origin.delayMs = 1500;
    const beforeR = await stats(regional);
    const answers = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => getMedia(i % 2 === 0 ? edge1 : edge2, key)),
    );
    origin.delayMs = 400;
    t.ok(
      answers.every((a) => a.status === 200 && a.body.equals(bytes)),
      'every request got the segment',
    );
    t.equal(origin.count(key), 1, 'one origin fetch');
    const afterR = await stats(regional);
    t.equal(afterR.upstreamFetches - beforeR.upstreamFetches, 1, 'one regional fetch for both edges');
    t.equal(afterR.requests - beforeR.requests, 2, 'the regional tier saw one request per edge');
  },
);

t.test('warm: hits, immutable headers, ETag and 304, ranges, HEAD', async (t) => {
  const key = 'videos/vwarm/r1/hls/144p/seg_00001.m4s';
  const bytes = segmentBytes('warm', 10_000);
  origin.objects.set(key, bytes);
  const first = await getMedia(edge1, key);
  t.equal(first.status, 200);
  t.match(String(first.headers['x-cache']), /^MISS edge1/);
  const second = await getMedia(edge1, key);
  t.match(String(second.headers['x-cache']), /^HIT edge1/, 'the second request is a hit');
  t.ok(second.body.equals(bytes), 'with the same bytes');
  t.equal(origin.count(key), 1, 'and no second origin fetch');
  t.equal(second.headers['cache-control'], 'public, max-age=31536000, immutable');
  t.equal(second.headers['content-type'], 'video/iso.segment');
  t.equal(second.headers['access-control-allow-origin'], '*');
  const etag = String(second.headers['etag']);
  t.match(etag, /^"[A-Za-z0-9_-]+"$/);
  const fromOtherEdge = await getMedia(edge2, key);
  t.equal(fromOtherEdge.headers['etag'], etag, 'every tier gives the same ETag for the same bytes');
  t.match(String(fromOtherEdge.headers['x-cache']), /^MISS edge2/, 'edge2 had not seen it');
  t.equal(origin.count(key), 1, 'edge2 filled from the regional tier, not the origin');

  const notModified = await getMedia(edge1, key, { 'if-none-match': etag });
  t.equal(notModified.status, 304);
  t.equal(notModified.body.length, 0);
  const ranged = await getMedia(edge1, key, { range: 'bytes=100-199' });
  t.equal(ranged.status, 206);
  t.equal(ranged.headers['content-range'], `bytes 100-199/${bytes.length}`);
  t.ok(ranged.body.equals(bytes.subarray(100, 200)), 'the range holds exactly bytes 100-199');
  const suffix = await getMedia(edge1, key, { range: 'bytes=-10' });
  t.ok(suffix.status === 206 && suffix.body.equals(bytes.subarray(bytes.length - 10)), 'a suffix range');
  const open = await getMedia(edge1, key, { range: 'bytes=9990-' });
  t.ok(open.status === 206 && open.body.equals(bytes.subarray(9990)), 'an open-ended range');
  const beyond = await getMedia(edge1, key, { range: 'bytes=20000-20010' });
  t.equal(beyond.status, 416);
  t.equal(beyond.headers['content-range'], `bytes */${bytes.length}`);
  t.equal((JSON.parse(beyond.body.toString()) as { error: { code: string } }).error.code, 'range_not_satisfiable');
  const head = await getMedia(edge1, key, {}, 'HEAD');
  t.equal(head.status, 200);
  t.equal(head.headers['content-length'], String(bytes.length));
  t.equal(head.body.length, 0, 'HEAD has no body');
});

t.test('an edge restarted keeps its disk cache', async (t) => {
  const key = 'videos/vdisk/r1/hls/240p/seg_00002.m4s';
  origin.objects.set(key, segmentBytes('disk', 30_000));
  t.equal((await getMedia(edge2, key)).status, 200);
  const port = Number(new URL(edge2.url).port);
  await edge2.stop();
  tiers.splice(tiers.indexOf(edge2), 1);
  edge2 = await startTier('edge2', 'edge', port, `${regional.url}/media`, [], { upstream_timeout_ms: '8000' });
  const again = await getMedia(edge2, key);
  t.match(String(again.headers['x-cache']), /^HIT edge2/, 'a hit from disk after the restart');
  t.equal((await stats(edge2)).upstreamFetches, 0, 'the restarted edge fetched nothing');
});

t.test('purge by video: regional and every edge drop it, the next view fetches the new bytes', async (t) => {
  const key = 'videos/vpurge/r1/hls/480p/seg_00000.m4s';
  const other = 'videos/vkeep/r1/hls/480p/seg_00000.m4s';
  origin.objects.set(key, segmentBytes('old', 5000));
  origin.objects.set(other, segmentBytes('keep', 5000));
  for (const e of [edge1, edge2]) {
    t.equal((await getMedia(e, key)).status, 200);
    t.equal((await getMedia(e, other)).status, 200);
  }
  t.equal(origin.count(key), 1);
  const unauth = await call(regional.url, 'POST', '/api/delivery/purge', { body: { video_id: 'vpurge' } });
  t.equal(unauth.status, 401, 'purge needs a token');
  const forged = await call(regional.url, 'POST', '/api/delivery/purge', {
    body: { video_id: 'vpurge' },
    token: 'client.viewer.not-a-valid-mac',
  });
  t.equal(forged.status, 401, 'a forged client token is refused');
  const viewer = await call(regional.url, 'POST', '/api/delivery/purge', {
    body: { video_id: 'vpurge' },
    token: deriveClientToken(TOKEN, 'viewer'),
  });
  t.equal(viewer.status, 403, 'a client token is not enough: purging is for the cluster');
  const purged = await call(regional.url, 'POST', '/api/delivery/purge', {
    body: { video_id: 'vpurge' },
    token: TOKEN,
  });
  t.equal(purged.status, 200, JSON.stringify(purged.body));
  t.equal(purged.body['purged'], 1, 'the regional tier dropped the one object');
  const down = purged.body['downstream'] as Array<{ id: string; purged: number }>;
  t.same(
    down.map((d) => [d.id, d.purged]).sort(),
    [
      ['edge1', 1],
      ['edge2', 1],
    ],
    'each edge dropped its copy',
  );
  const fresh = segmentBytes('new bytes after a re-encode', 6000);
  origin.objects.set(key, fresh);
  const after = await getMedia(edge2, key);
  t.ok(after.body.equals(fresh), 'the next view has the new bytes');
  t.equal(origin.count(key), 2, 'fetched again from the origin');
  t.match(String((await getMedia(edge1, other)).headers['x-cache']), /^HIT/, 'another video is untouched');
  const bad = await call(regional.url, 'POST', '/api/delivery/purge', { body: { prefix: '../' }, token: TOKEN });
  t.equal(bad.status, 400);
  const both = await call(regional.url, 'POST', '/api/delivery/purge', {
    body: { prefix: 'videos/x/', video_id: 'x' },
    token: TOKEN,
  });
  t.equal(both.status, 400);
  const notJson = await call(edge1.url, 'POST', '/api/delivery/purge', { raw: '{', token: TOKEN });
  t.equal(notJson.status, 400);
});

t.test('prefill from an HLS master: every object on every edge before anyone watches', async (t) => {
  const base = 'videos/vprefill/r1/hls';
  origin.objects.set(
    `${base}/master.m3u8`,
    Buffer.from(
      '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=256x144\n144p/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=640x360\n360p/index.m3u8\n',
    ),
  );
  for (const q of ['144p', '360p']) {
    origin.objects.set(
      `${base}/${q}/index.m3u8`,
      Buffer.from(
        `#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:6\n#EXT-X-MAP:URI="init.mp4"\n#EXTINF:6.0,\nseg_00000.m4s\n#EXTINF:6.0,\nseg_00001.m4s\n#EXT-X-ENDLIST\n`,
      ),
    );
    origin.objects.set(`${base}/${q}/init.mp4`, segmentBytes(`${q} init`, 800));
    for (const s of ['seg_00000.m4s', 'seg_00001.m4s'])
      origin.objects.set(`${base}/${q}/${s}`, segmentBytes(`${q}${s}`, 4000));
  }
  const answer = await call(regional.url, 'POST', '/api/delivery/prefill', {
    body: { manifest: `${base}/master.m3u8` },
    token: TOKEN,
    timeoutMs: 60_000,
  });
  t.equal(answer.status, 200, JSON.stringify(answer.body));
  t.equal(answer.body['keys'], 9, 'master, 2 variants, 2 init sections, 4 segments');
  t.same(answer.body['failed'], []);
  const edges = answer.body['downstream'] as Array<{ id: string; keys: number; fetched: number }>;
  t.same(
    edges.map((e) => [e.id, e.keys, e.fetched]).sort(),
    [
      ['edge1', 9, 9],
      ['edge2', 9, 9],
    ],
    'both edges warmed all nine',
  );
  for (const key of origin.objects.keys())
    if (key.startsWith(base)) t.equal(origin.count(key), 1, `${key} fetched from the origin once`);
  for (const e of [edge1, edge2]) {
    const seg = await getMedia(e, `${base}/360p/seg_00001.m4s`);
    t.match(String(seg.headers['x-cache']), new RegExp(`^HIT ${e.id}`), `${e.id} serves a prefilled segment as a hit`);
  }
  const keysOnly = await call(edge1.url, 'POST', '/api/delivery/prefill', {
    body: { keys: [`${base}/144p/init.mp4`, 'videos/vprefill/r1/missing.m4s'] },
    token: TOKEN,
  });
  t.equal(keysOnly.status, 200);
  t.same(
    keysOnly.body['failed'],
    [{ key: 'videos/vprefill/r1/missing.m4s', status: 404, code: 'not_found' }],
    'a missing object is reported, not fatal',
  );
  for (const body of [{}, { keys: 'x' }, { keys: ['../x'] }, { manifest: 'a/b.mpd' }, { keys: [1] }]) {
    const bad = await call(regional.url, 'POST', '/api/delivery/prefill', { body, token: TOKEN });
    t.equal(bad.status, 400, `prefill ${JSON.stringify(body)} is a 400`);
  }
});

t.test('origin hung -> 504, origin down -> 502, JSON errors, no process dies', async (t) => {
  origin.hang = true;
  const hung = await getMedia(edge1, 'videos/vhang/r1/hls/720p/seg_00000.m4s');
  origin.hang = false;
  t.equal(hung.status, 504, hung.body.toString());
  t.equal((JSON.parse(hung.body.toString()) as { error: { code: string } }).error.code, 'upstream_timeout');

  await origin.stop();
  const answers = await Promise.all(
    Array.from({ length: 50 }, () => getMedia(edge2, 'videos/vdown/r1/hls/720p/seg_00000.m4s')),
  );
  t.ok(
    answers.every((a) => a.status === 502),
    `every request is a 502 (${[...new Set(answers.map((a) => a.status))].join(',')})`,
  );
  const error = (JSON.parse(answers[0]!.body.toString()) as { error: { code: string; message: string } }).error;
  t.equal(error.code, 'upstream_unavailable');
  t.equal(answers[0]!.headers['content-type'], 'application/json');
  // Cached objects still play while the origin is down.
  const cached = await getMedia(edge1, 'videos/vwarm/r1/hls/144p/seg_00001.m4s');
  t.equal(cached.status, 200, 'a cached segment is still served');
  for (const tier of tiers) {
    t.equal(tier.child.exitCode, null, `${tier.id} is still running`);
    t.equal((await call(tier.url, 'GET', '/healthz')).status, 200);
  }
  await origin.start(origin.port);
  const back = await getMedia(edge2, 'videos/vdown/r1/hls/720p/seg_00000.m4s');
  t.equal(back.status, 404, 'with the origin back, a missing object is a plain 404');
});

t.test('bad paths and methods are 4xx JSON', async (t) => {
  const cases: Array<[string, string, number]> = [
    ['GET', '/media/', 400],
    ['GET', '/media/videos/../etc/passwd', 400],
    ['GET', '/media/videos/%2e%2e/secret', 400],
    ['GET', '/media/videos/.hidden', 400],
    ['GET', '/media/videos//double', 400],
    ['GET', '/media/%zz', 400],
    ['GET', `/media/${'a'.repeat(600)}`, 400],
    ['GET', '/media/videos/a%20b/seg.m4s', 400],
    ['POST', '/media/videos/x/seg.m4s', 405],
    ['DELETE', '/media/videos/x/seg.m4s', 405],
    ['GET', '/api/delivery/nothing', 404],
  ];
  for (const [method, path, status] of cases) {
    const answer = await rawGet(edge1.url, path, method);
    t.equal(answer.status, status, `${method} ${path.slice(0, 60)} -> ${status}`);
    const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
    t.type(body.error.code, 'string');
    t.type(body.error.message, 'string');
  }
  // A raw upload is never served by a cache, even with the published check off: refused before any fetch.
  origin.objects.set('raw/u-secret', Buffer.from('the original upload'));
  for (const tier of [edge1, regional]) {
    const raw = await getMedia(tier, 'raw/u-secret');
    t.equal(raw.status, 404, `${tier.id}: raw/<upload_id> is 404`);
  }
  t.equal(origin.count('raw/u-secret'), 0, 'and the origin was never asked for it');
  const stats404 = await call(edge1.url, 'GET', '/api/delivery/stats');
  t.equal(stats404.status, 401, 'stats need the cluster token');
  await until(
    'edge1 healthy after the bad requests',
    async () => (await call(edge1.url, 'GET', '/healthz')).status === 200,
    10_000,
  );
});
