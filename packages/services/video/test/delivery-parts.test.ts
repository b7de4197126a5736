// The delivery tier's parts without sockets: the byte-bounded memory LRU over a disk folder (eviction, restart,
// purge, a failing disk), single flight, byte ranges, playlist walking for prefill, key checks, edge choice.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { HttpError } from '@raftkit/http';
import {
  checkKey,
  Coalescer,
  etagOf,
  ObjectCache,
  parseRange,
  pickEdge,
  playlistReferences,
  PublishedCheck,
  servable,
  type CachedObject,
} from '../src/workers/delivery/index.js';
import { VideoMachine, type Video } from '../src/machine.js';

const dir = mkdtempSync(join(tmpdir(), 'video-delivery-parts-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function object(key: string, size: number, fill = 1): CachedObject {
  const body = Buffer.alloc(size, fill);
  return { key, body, contentType: 'video/iso.segment', etag: etagOf(body) };
}

t.test('memory is bounded in bytes, least recently used out first; disk keeps what memory dropped', async (t) => {
  const cache = new ObjectCache(join(dir, 'lru'), { memoryBytes: 1000, diskBytes: 10_000 });
  cache.put(object('a', 400));
  cache.put(object('b', 400));
  t.ok(cache.get('a'), 'a read: now the most recent');
  cache.put(object('c', 400));
  const s = cache.stats();
  t.equal(s.memoryBytes, 800, 'two objects fit in 1000 bytes');
  t.equal(s.diskObjects, 3, 'all three on disk');
  t.ok(
    cache.get('b')?.body.equals(Buffer.alloc(400, 1)),
    'b, evicted from memory (least recent), comes back from disk',
  );
  cache.put(object('huge', 2000));
  t.equal(cache.stats().memoryBytes <= 1000, true, 'an object over the memory bound never enters memory');
  t.ok(cache.get('huge'), 'but is kept on disk');
});

t.test('disk is bounded in bytes and survives a restart', async (t) => {
  const folder = join(dir, 'disk');
  const cache = new ObjectCache(folder, { memoryBytes: 100, diskBytes: 1000 });
  for (const k of ['x/1', 'x/2', 'x/3']) cache.put(object(k, 400));
  t.equal(cache.stats().diskBytes, 800, 'the oldest was evicted from disk');
  t.notOk(cache.has('x/1'));
  writeFileSync(join(folder, 'leftover.bin.tmp'), 'torn write');
  const again = new ObjectCache(folder, { memoryBytes: 100, diskBytes: 1000 });
  t.same(
    [again.has('x/1'), again.has('x/2'), again.has('x/3')],
    [false, true, true],
    'a restart finds what was on disk',
  );
  const x2 = again.get('x/2')!;
  t.equal(x2.etag, etagOf(Buffer.alloc(400, 1)), 'with its ETag');
  t.equal(x2.contentType, 'video/iso.segment', 'and its type');
});

t.test('purge drops a prefix from memory and disk, nothing else', async (t) => {
  const cache = new ObjectCache(join(dir, 'purge'), { memoryBytes: 10_000, diskBytes: 10_000 });
  for (const k of ['videos/a/r1/x', 'videos/a/r1/y', 'videos/ab/r1/x', 'videos/b/r1/x']) cache.put(object(k, 10));
  t.same(
    cache.purge('videos/a/').sort(),
    ['videos/a/r1/x', 'videos/a/r1/y'],
    'the prefix ends at a segment: videos/ab is another video',
  );
  t.same(
    ['videos/a/r1/x', 'videos/ab/r1/x', 'videos/b/r1/x'].map((k) => cache.has(k)),
    [false, true, true],
  );
  const restarted = new ObjectCache(join(dir, 'purge'), { memoryBytes: 10_000, diskBytes: 10_000 });
  t.notOk(restarted.has('videos/a/r1/y'), 'purged from disk too');
});

t.test('a failing disk costs the disk copy, not the answer', async (t) => {
  const folder = join(dir, 'failing');
  const cache = new ObjectCache(folder, { memoryBytes: 10_000, diskBytes: 10_000 });
  rmSync(folder, { recursive: true, force: true });
  writeFileSync(folder, 'a file where the cache folder was');
  t.doesNotThrow(() => cache.put(object('k', 100)));
  t.ok(cache.get('k'), 'served from memory');
  t.equal(cache.stats().diskWriteFailures, 1);
  t.equal(cache.stats().diskObjects, 0);
});

t.test('single flight: concurrent runs of one key share one fetch, its result and its failure', async (t) => {
  const c = new Coalescer<number>();
  let fetches = 0;
  let joins = 0;
  let release!: (n: number) => void;
  const fetch = (): Promise<number> => {
    fetches++;
    return new Promise<number>((r) => (release = r));
  };
  const runs = Array.from({ length: 100 }, () => c.run('k', fetch, () => joins++));
  t.equal(c.size, 1);
  release(42);
  t.same(new Set(await Promise.all(runs)), new Set([42]));
  t.equal(fetches, 1, 'one fetch');
  t.equal(joins, 99, '99 joined it');
  t.equal(c.size, 0, 'nothing left in flight');
  await c.run('k', () => Promise.resolve(7));
  t.equal(fetches, 1, 'a later run starts its own fetch (the caller caches, not the coalescer)');
  const failing = Array.from({ length: 3 }, () => c.run('bad', () => Promise.reject(new Error('origin down'))));
  for (const f of failing) await t.rejects(f, /origin down/);
  t.equal(c.size, 0, 'a failure is not kept');
});

t.test('byte ranges', async (t) => {
  t.same(parseRange(undefined, 100), null);
  t.same(parseRange('bytes=0-9', 100), [0, 9]);
  t.same(parseRange('bytes=90-', 100), [90, 99]);
  t.same(parseRange('bytes=90-500', 100), [90, 99], 'an end past the object is clamped');
  t.same(parseRange('bytes=-10', 100), [90, 99]);
  t.same(parseRange('bytes=-500', 100), [0, 99]);
  t.equal(parseRange('bytes=100-', 100), 'unsatisfiable');
  t.equal(parseRange('bytes=5-2', 100), 'unsatisfiable');
  t.equal(parseRange('bytes=-0', 100), 'unsatisfiable');
  t.same(parseRange('bytes=0-1,5-6', 100), null, 'several ranges: the whole object');
  t.same(parseRange('items=0-1', 100), null, 'another unit: the whole object');
  t.same(parseRange('bytes=-', 100), null);
});

t.test('prefill walks HLS playlists: variants, init sections, segments, renditions', async (t) => {
  const master = [
    '#EXTM3U',
    '#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",URI="captions/en.m3u8"',
    '#EXT-X-STREAM-INF:BANDWIDTH=200000,RESOLUTION=256x144',
    '144p/index.m3u8',
    '#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=426x240',
    '240p/index.m3u8?v=1',
    '#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=1x1',
    'https://elsewhere.example/x.m3u8',
    '',
  ].join('\n');
  t.same(
    playlistReferences('videos/v/r1/master.m3u8', master),
    ['videos/v/r1/captions/en.m3u8', 'videos/v/r1/144p/index.m3u8', 'videos/v/r1/240p/index.m3u8'],
    'relative to the master, query dropped, other hosts skipped',
  );
  const variant =
    '#EXTM3U\r\n#EXT-X-MAP:URI="init.mp4"\r\n#EXTINF:6,\r\nseg-00000.m4s\r\n#EXTINF:6,\r\n../240p/seg-00001.m4s\r\n#EXTINF:6,\r\n/media/videos/v/r1/144p/seg-00002.m4s\r\n#EXT-X-ENDLIST\r\n';
  t.same(
    playlistReferences('videos/v/r1/144p/index.m3u8', variant),
    [
      'videos/v/r1/144p/init.mp4',
      'videos/v/r1/144p/seg-00000.m4s',
      'videos/v/r1/240p/seg-00001.m4s',
      'videos/v/r1/144p/seg-00002.m4s',
    ],
    'init section, segments, .. and tier paths resolved',
  );
  t.same(playlistReferences('a.m3u8', '#EXTM3U\n../../etc/passwd\n'), [], 'nothing above the root');
});

t.test('object keys', async (t) => {
  for (const ok of ['videos/v1/r1/144p/seg-00000.m4s', 'a', 'x_y/Z-9.mpd', 'videos/-Ab3_x/r1/240p/init.mp4'])
    t.doesNotThrow(() => checkKey(ok), ok);
  for (const bad of ['', '/a', 'a/', 'a//b', '../a', 'a/../b', 'a/.hidden', 'a b', 'a/%2e', 'x'.repeat(513), 'é']) {
    let error: unknown = null;
    try {
      checkKey(bad);
    } catch (e) {
      error = e;
    }
    t.ok(
      error instanceof HttpError && error.status === 400 && error.code === 'invalid_key',
      `${JSON.stringify(bad.slice(0, 20))} is a 400 invalid_key`,
    );
  }
});

t.test('edge choice: stable per video, spread over edges, and removing an edge moves only its videos', async (t) => {
  const edges = [{ id: 'edge1' }, { id: 'edge2' }, { id: 'edge3' }];
  const ids = Array.from({ length: 3000 }, (_, i) => `video${i}`);
  const first = ids.map((v) => pickEdge(v, edges).id);
  t.same(
    ids.map((v) => pickEdge(v, [...edges].reverse()).id),
    first,
    'the same edge whatever the list order',
  );
  const counts = new Map<string, number>();
  for (const e of first) counts.set(e, (counts.get(e) ?? 0) + 1);
  for (const e of edges) t.ok((counts.get(e.id) ?? 0) > 800, `${e.id} serves ${counts.get(e.id)} of 3000 videos`);
  const without = ids.map((v) => pickEdge(v, [edges[0]!, edges[2]!]).id);
  const moved = ids.filter((_, i) => first[i] !== without[i]);
  t.ok(
    moved.every((v) => first[ids.indexOf(v)] === 'edge2'),
    'only edge2 videos moved',
  );
  t.equal(moved.length, counts.get('edge2'), 'and all of them');
  t.throws(() => pickEdge('v', []));
});

/** A video record as the machine makes it: uploaded, probed with two qualities, the first published. */
function record(): Video {
  const m = new VideoMachine();
  const ctx = { index: 1, term: 1, time: 0 };
  m.apply(
    {
      op: 'createUpload',
      uploadId: 'u1',
      uploaderId: 'ann',
      idempotencyKey: 'k',
      title: 'T',
      description: '',
      tags: [],
      privacy: 'public',
      totalSize: null,
      now: 1,
    },
    ctx,
  );
  m.apply(
    {
      op: 'finalize',
      uploadId: 'u1',
      videoId: 'v1',
      totalChunks: 1,
      size: 10,
      sha256: 'a'.repeat(64),
      rawPath: 'raw/u1',
      now: 2,
    },
    ctx,
  );
  m.apply(
    {
      op: 'probed',
      videoId: 'v1',
      durationS: 10,
      codec: 'h264',
      width: 426,
      height: 240,
      fps: '30',
      hasAudio: true,
      qualities: [
        { name: '144p', width: 256, height: 144, bandwidth: 1 },
        { name: '240p', width: 426, height: 240, bandwidth: 2 },
      ],
      segmentS: 30,
      segments: 1,
      now: 3,
    },
    ctx,
  );
  return structuredClone(m.getVideo('v1')!);
}

t.test('servable: published outputs of a playable video only', async (t) => {
  const v = record();
  t.notOk(servable('videos/v1/r1/master.m3u8', v), 'transcoding: no master yet');
  v.thumbnails = ['videos/v1/r1/thumbs/thumb-50.jpg'];
  t.ok(servable('videos/v1/r1/thumbs/thumb-50.jpg', v), 'transcoding: a thumbnail the record names');
  v.status = 'playable';
  v.manifest_path = 'videos/v1/r1/master.m3u8';
  v.qualities[0]!.published = true;
  for (const key of [
    'videos/v1/r1/master.m3u8',
    'videos/v1/r1/manifest.mpd',
    'videos/v1/r1/144p/init.mp4',
    'videos/v1/r1/144p/seg-00000.m4s',
    'videos/v1/r1/captions/en.vtt',
  ])
    t.ok(servable(key, v), key);
  for (const key of [
    'raw/u1',
    'videos/v1/r1/240p/init.mp4',
    'videos/v1/r2/master.m3u8',
    'videos/v2/r1/master.m3u8',
    'videos/v1/r1/144p',
    'uploads/u1/0.chunk',
  ])
    t.notOk(servable(key, v), `refused: ${key}`);
  // A re-encode in progress: the previous revision plays, the new one is not served until published.
  const before = structuredClone(v);
  v.previous = {
    revision: 1,
    qualities: before.qualities,
    thumbnails: before.thumbnails,
    poster_path: null,
    captions_path: null,
    transcoded_at: null,
    stage: null,
  };
  v.revision = 2;
  v.qualities = [];
  t.ok(servable('videos/v1/r1/144p/init.mp4', v), 'the previous revision plays during a re-encode');
  t.notOk(servable('videos/v1/r2/master.m3u8', v), 'the new one is not published');
  for (const status of ['flagged', 'taken_down', 'failed'] as const) {
    const w = { ...before, status };
    t.notOk(
      servable('videos/v1/r1/master.m3u8', w) || servable('videos/v1/r1/thumbs/thumb-50.jpg', w),
      `${status}: nothing`,
    );
  }
});

/** The status of the HttpError `f` throws at once (0 when it does not throw). */
function statusOf(f: () => unknown): number {
  try {
    f();
    return 0;
  } catch (e) {
    return e instanceof HttpError ? e.status : -1;
  }
}

t.test(
  'the record cache: fresh records decide without a read; a purge drops the record and any read in flight',
  async (t) => {
    let now = 0;
    const v = record();
    v.status = 'playable';
    v.manifest_path = 'videos/v1/r1/master.m3u8';
    let current: Video = v;
    let reads = 0;
    let hold = false;
    const waiting: Array<() => void> = [];
    const gone: string[] = [];
    const check = new PublishedCheck({
      // Reads the record when called (as the members answer) and, while `hold`, answers only when released.
      source: async () => {
        reads++;
        const answer = structuredClone(current);
        if (hold) await new Promise<void>((r) => waiting.push(r));
        return answer;
      },
      ttlMs: 5_000,
      clock: () => now,
      onGone: (id) => gone.push(id),
    });
    await check.check('videos/v1/r1/master.m3u8');
    t.equal(check.check('videos/v1/r1/master.m3u8'), undefined, 'a fresh record decides at once');
    t.equal(reads, 1);
    t.equal(
      statusOf(() => check.check('raw/u1')),
      404,
      'raw/ is refused without a read',
    );
    // A read starts (the record expired), then the video is taken down and purged while it is in flight.
    now = 6_000;
    hold = true;
    const stale = check.check('videos/v1/r1/master.m3u8')!;
    current = { ...v, status: 'taken_down' };
    check.forget('videos/v1/');
    const after = check.check('videos/v1/r1/master.m3u8')!;
    t.equal(reads, 3, 'after the purge the record is read again, not joined to the read in flight');
    for (const r of waiting.splice(0)) r();
    await stale;
    t.equal(
      await after.then(
        () => 0,
        (e: unknown) => (e instanceof HttpError ? e.status : -1),
      ),
      404,
      'and the take-down is seen',
    );
    t.equal(
      statusOf(() => check.check('videos/v1/r1/master.m3u8')),
      404,
      'the read from before the purge was not kept',
    );
    t.same(gone, ['v1'], "a taken-down record drops the tier's cached objects");
  },
);
