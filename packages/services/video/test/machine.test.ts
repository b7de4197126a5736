/**
 * The metadata machine alone: no sockets, no clocks (every time is in the command). Uploads and idempotency,
 * finalize, probe planning, leases (an expired lease is claimable again; a late finisher of an old lease is
 * ignored), playable after one quality, failure states, moderation, storage tiers with an injected clock, and
 * snapshots that restore to the same behaviour.
 */
import t from 'tap';
import { checkCommandShapes } from '@raftkit/testkit';
import {
  DEFAULT_LIMITS,
  VideoMachine,
  type QualitySpec,
  type Task,
  type VideoCommand,
  type VideoResult,
} from '../src/machine.js';
import { majority, placeReplicas, replicaCount } from '../src/placement.js';

const T0 = 1_800_000_000_000;
const DAY = 86_400_000;
let index = 0;
function run(m: VideoMachine, c: VideoCommand): VideoResult {
  return m.apply(c, { index: ++index, term: 1, time: 0 });
}
const Q: QualitySpec[] = [
  { name: '144p', width: 256, height: 144, bandwidth: 200_000 },
  { name: '240p', width: 426, height: 240, bandwidth: 400_000 },
];
function upload(m: VideoMachine, id = 'u1', key = 'k1', user = 'ann'): VideoResult {
  return run(m, {
    op: 'createUpload',
    uploadId: id,
    uploaderId: user,
    idempotencyKey: key,
    title: 'T',
    description: '',
    tags: ['a'],
    privacy: 'public',
    totalSize: 1000,
    now: T0,
  });
}
function finalized(m: VideoMachine, id = 'u1', video = 'v1', user = 'ann'): void {
  upload(m, id, `key-${id}`, user);
  run(m, {
    op: 'finalize',
    uploadId: id,
    videoId: video,
    totalChunks: 2,
    size: 1000,
    sha256: 'a'.repeat(64),
    rawPath: `raw/${id}`,
    now: T0 + 1,
  });
}
function probed(m: VideoMachine, video = 'v1', duration = 65): void {
  run(m, {
    op: 'probed',
    videoId: video,
    durationS: duration,
    codec: 'h264',
    width: 320,
    height: 240,
    fps: '30',
    hasAudio: true,
    qualities: Q,
    segmentS: 30,
    segments: Math.ceil((duration - 0.5) / 30),
    now: T0 + 2,
  });
}
const output = (path: string) => ({
  storage_path: path,
  size_bytes: 10,
  duration_ms: 30_000,
  codecs: 'avc1.42C00C',
  parts: [{ name: 'seg-00000.m4s', duration_ms: 6_000, size_bytes: 10 }],
});
function claim(m: VideoMachine, worker: string, lease: string, now: number, leaseMs = 10_000): Task | null {
  const r = run(m, { op: 'claim', workerId: worker, leaseId: lease, leaseMs, now });
  return r.op === 'claim' ? r.task : null;
}

t.test('uploads: an idempotency key gives the same upload; finalize creates the video once', async (t) => {
  const m = new VideoMachine();
  const a = upload(m, 'u1', 'k1');
  const b = upload(m, 'u2', 'k1');
  t.match(a, { created: true, upload: { upload_id: 'u1', status: 'uploading' } });
  t.match(b, { created: false, upload: { upload_id: 'u1' } }, 'same key, same upload');
  t.match(upload(m, 'u3', 'k1', 'bob'), { created: true, upload: { upload_id: 'u3' } }, 'keys are per uploader');
  const f = run(m, {
    op: 'finalize',
    uploadId: 'u1',
    videoId: 'v1',
    totalChunks: 2,
    size: 1000,
    sha256: 'a'.repeat(64),
    rawPath: 'raw/u1',
    now: T0 + 5,
  });
  t.match(f, {
    ok: true,
    created: true,
    video: { video_id: 'v1', status: 'transcoding', stage: 'probe', privacy: 'public' },
  });
  t.match(
    run(m, {
      op: 'finalize',
      uploadId: 'u1',
      videoId: 'v-other',
      totalChunks: 2,
      size: 1000,
      sha256: 'a'.repeat(64),
      rawPath: 'raw/u1',
      now: T0 + 6,
    }),
    { ok: true, created: false, video: { video_id: 'v1' } },
    'a retried finalize answers the same video',
  );
  t.match(m.getUpload('u1'), { status: 'uploaded', video_id: 'v1', received_chunks: 2, total_size: 1000 });
  t.match(
    run(m, {
      op: 'finalize',
      uploadId: 'nope',
      videoId: 'v9',
      totalChunks: 1,
      size: 1,
      sha256: 'a'.repeat(64),
      rawPath: 'raw/x',
      now: T0,
    }),
    { ok: false, code: 'upload_not_found' },
  );
});

t.test('probe plans one task per (30-s segment, quality), lowest quality first', async (t) => {
  const m = new VideoMachine();
  finalized(m);
  probed(m, 'v1', 65);
  const v = m.getVideo('v1')!;
  t.match(v, { status: 'transcoding', stage: 'transcode', duration_s: 65, source_codec: 'h264' });
  t.equal(m.openTasks('v1').length, 6, '3 segments x 2 qualities');
  t.same(
    m
      .openTasks('v1')
      .slice(0, 3)
      .map((x) => x.quality),
    ['144p', '144p', '144p'],
  );
  t.same(
    m
      .openTasks('v1')
      .map((x) => x.duration_s)
      .slice(0, 3),
    [30, 30, 5],
  );
  probed(m, 'v1', 65);
  t.equal(m.openTasks('v1').length, 6, 'a second probe result queues nothing more');
});

t.test(
  'leases: an expired lease is claimable again; the first finisher wins; playable after one quality',
  async (t) => {
    const m = new VideoMachine();
    finalized(m);
    probed(m, 'v1', 65);
    const a = claim(m, 'w1', 'L1', T0 + 10)!;
    t.equal(a.key, 'v1/r1/144p/0');
    const b = claim(m, 'w2', 'L2', T0 + 20)!;
    t.equal(b.key, 'v1/r1/144p/1', 'a leased task is not handed out twice');
    // w1 dies: after its lease expires, its task goes to w3.
    const c = claim(m, 'w3', 'L3', T0 + 10 + 10_001)!;
    t.equal(c.key, 'v1/r1/144p/0', 'the dead worker task is re-leased');
    t.equal(c.attempts, 2);
    t.match(
      run(m, {
        op: 'complete',
        taskKey: c.key,
        leaseId: 'L3',
        output: output('videos/v1/r1/144p/0'),
        now: T0 + 20_100,
      }),
      { accepted: true },
    );
    t.match(
      run(m, {
        op: 'complete',
        taskKey: c.key,
        leaseId: 'L1',
        output: output('videos/v1/r1/144p/0'),
        now: T0 + 20_200,
      }),
      { accepted: false },
      'a late copy changes nothing',
    );
    t.match(
      run(m, { op: 'complete', taskKey: b.key, leaseId: 'forged', output: output('x'), now: T0 + 20_200 }),
      { accepted: false },
      'a lease never issued is refused',
    );
    run(m, { op: 'complete', taskKey: b.key, leaseId: 'L2', output: output('videos/v1/r1/144p/1'), now: T0 + 20_300 });
    const d = claim(m, 'w1', 'L4', T0 + 20_400)!;
    t.equal(d.key, 'v1/r1/144p/2');
    run(m, { op: 'complete', taskKey: d.key, leaseId: 'L4', output: output('videos/v1/r1/144p/2'), now: T0 + 20_500 });
    t.match(m.getVideo('v1')!.qualities[0], { name: '144p', done: 3, segments: 3 });
    t.same(
      m.pipelineWork().publish.map((v) => v.video_id),
      ['v1'],
      'the manifest step sees a complete quality',
    );
    t.match(
      run(m, {
        op: 'published',
        videoId: 'v1',
        revision: 1,
        qualities: ['144p', '240p'],
        manifestPath: 'm',
        now: T0 + 21_000,
      }),
      { ok: false },
      'an incomplete quality cannot be published',
    );
    t.match(
      run(m, {
        op: 'published',
        videoId: 'v1',
        revision: 1,
        qualities: ['144p'],
        manifestPath: 'videos/v1/r1/master.m3u8',
        now: T0 + 21_000,
      }),
      { ok: true, video: { status: 'playable', stage: 'transcode', manifest_path: 'videos/v1/r1/master.m3u8' } },
    );
    t.equal(m.segmentsOf('v1', '144p').length, 3);
    t.equal(m.getVideo('v1')!.transcoded_at, null, 'not all qualities yet');
    for (let i = 0; i < 3; i++) {
      const x = claim(m, 'w1', `M${i}`, T0 + 30_000 + i)!;
      t.equal(x.quality, '240p');
      run(m, {
        op: 'complete',
        taskKey: x.key,
        leaseId: `M${i}`,
        output: output(`videos/v1/r1/240p/${i}`),
        now: T0 + 40_000,
      });
    }
    t.equal(claim(m, 'w1', 'none', T0 + 50_000), null, 'the queue is empty');
    t.equal(m.getVideo('v1')!.transcoded_at, T0 + 40_000);
    run(m, {
      op: 'published',
      videoId: 'v1',
      revision: 1,
      qualities: ['144p', '240p'],
      manifestPath: 'videos/v1/r1/master.m3u8',
      now: T0 + 41_000,
    });
    t.match(m.getVideo('v1'), {
      status: 'playable',
      stage: null,
      qualities: [{ published: true }, { published: true }],
    });
  },
);

t.test('a segment claim leases the other qualities of its segment above the lowest, under one lease', async (t) => {
  const m = new VideoMachine();
  finalized(m);
  run(m, {
    op: 'probed',
    videoId: 'v1',
    durationS: 65,
    codec: 'h264',
    width: 640,
    height: 360,
    fps: '30',
    hasAudio: true,
    qualities: [...Q, { name: '360p', width: 640, height: 360, bandwidth: 800_000 }],
    segmentS: 30,
    segments: 3,
    now: T0 + 2,
  });
  const segmentClaim = (lease: string, now: number) =>
    run(m, { op: 'claim', workerId: 'w', leaseId: lease, leaseMs: 10_000, now, segment: true });
  t.match(segmentClaim('L1', T0 + 3), { task: { quality: '144p', segment_index: 0 }, also: [] }, '144p alone');
  for (const lease of ['L2', 'L3']) segmentClaim(lease, T0 + 3);
  const third = claim(m, 'w', 'L4', T0 + 3);
  t.match(third, { quality: '240p', segment_index: 0 }, 'a plain claim takes one task');
  const r = segmentClaim('L5', T0 + 3);
  t.match(r, { task: { quality: '240p', segment_index: 1 } });
  t.same(
    r.op === 'claim' ? r.also?.map((x) => [x.quality, x.segment_index, x.lease?.id]) : null,
    [['360p', 1, 'L5']],
    'its 360p sibling under the same lease',
  );
  t.match(segmentClaim('L6', T0 + 3), { task: { quality: '240p', segment_index: 2 } });
  t.match(segmentClaim('L7', T0 + 3), { task: { quality: '360p', segment_index: 0 }, also: [] }, 'the rest');
  t.match(segmentClaim('L8', T0 + 3), { task: null });
  t.match(run(m, { op: 'complete', taskKey: 'v1/r1/360p/1', leaseId: 'L5', output: output('p'), now: T0 + 4 }), {
    accepted: true,
  });
});

t.test("renew: the holder extends its lease before it runs out; after, the task may be another worker's", async (t) => {
  const m = new VideoMachine();
  finalized(m);
  probed(m, 'v1', 20);
  const a = claim(m, 'w1', 'L1', T0, 10_000)!;
  t.match(run(m, { op: 'renew', taskKey: a.key, leaseId: 'L1', leaseMs: 10_000, now: T0 + 9_000 }), {
    renewed: true,
    until: T0 + 19_000,
  });
  t.equal(claim(m, 'w2', 'L2', T0 + 15_000)?.key === a.key, false, 'a renewed lease is not handed out');
  t.match(
    run(m, { op: 'renew', taskKey: a.key, leaseId: 'other', leaseMs: 10_000, now: T0 + 16_000 }),
    { renewed: false },
    'only the holder renews',
  );
  t.match(
    run(m, { op: 'renew', taskKey: a.key, leaseId: 'L1', leaseMs: 10_000, now: T0 + 19_001 }),
    { renewed: false },
    'too late: the lease ran out',
  );
});

t.test('re-encode: a new revision, the old manifest kept until the new one is published', async (t) => {
  const m = new VideoMachine();
  finalized(m);
  run(m, {
    op: 'probed',
    videoId: 'v1',
    durationS: 10,
    codec: 'h264',
    width: 256,
    height: 144,
    fps: '30',
    hasAudio: true,
    qualities: [Q[0]!],
    segmentS: 30,
    segments: 1,
    now: T0,
  });
  t.match(run(m, { op: 'reencode', videoId: 'v1', now: T0 }), { ok: false }, 'not while transcoding');
  const x = claim(m, 'w', 'L', T0)!;
  run(m, { op: 'complete', taskKey: x.key, leaseId: 'L', output: output('videos/v1/r1/144p'), now: T0 });
  run(m, {
    op: 'published',
    videoId: 'v1',
    revision: 1,
    qualities: ['144p'],
    manifestPath: 'videos/v1/r1/master.m3u8',
    now: T0,
  });
  t.match(run(m, { op: 'reencode', videoId: 'v1', now: T0 + 1 }), {
    ok: true,
    video: { revision: 2, stage: 'probe', status: 'playable', manifest_path: 'videos/v1/r1/master.m3u8' },
  });
  t.same(
    m.pipelineWork().probe.map((v) => v.video_id),
    ['v1'],
    'the pipeline probes it again',
  );
  run(m, {
    op: 'probed',
    videoId: 'v1',
    durationS: 10,
    codec: 'h264',
    width: 256,
    height: 144,
    fps: '30',
    hasAudio: true,
    qualities: [Q[0]!],
    segmentS: 30,
    segments: 1,
    now: T0 + 2,
  });
  const y = claim(m, 'w', 'L2', T0 + 3)!;
  t.equal(y.key, 'v1/r2/144p/0', 'tasks of the new revision');
  t.match(
    run(m, { op: 'published', videoId: 'v1', revision: 1, qualities: ['144p'], manifestPath: 'old', now: T0 }),
    { ok: false },
    'an old revision cannot publish',
  );
  run(m, { op: 'complete', taskKey: y.key, leaseId: 'L2', output: output('videos/v1/r2/144p'), now: T0 + 4 });
  run(m, {
    op: 'published',
    videoId: 'v1',
    revision: 2,
    qualities: ['144p'],
    manifestPath: 'videos/v1/r2/master.m3u8',
    now: T0 + 5,
  });
  t.match(m.getVideo('v1'), {
    status: 'playable',
    stage: null,
    revision: 2,
    manifest_path: 'videos/v1/r2/master.m3u8',
  });
  t.equal(m.segmentsOf('v1', '144p')[0]!.storage_path, 'videos/v1/r2/144p');
});

t.test('failures: a failed probe and a task failing every attempt end in failed with a reason', async (t) => {
  const m = new VideoMachine();
  finalized(m, 'u1', 'v1');
  t.match(run(m, { op: 'fail', videoId: 'v1', stage: 'probe', reason: 'not a video: no video stream', now: T0 + 3 }), {
    ok: true,
    video: { status: 'failed', failure: { stage: 'probe', reason: 'not a video: no video stream' } },
  });
  finalized(m, 'u2', 'v2');
  run(m, {
    op: 'probed',
    videoId: 'v2',
    durationS: 10,
    codec: 'h264',
    width: 256,
    height: 144,
    fps: '30',
    hasAudio: true,
    qualities: [Q[0]!],
    segmentS: 30,
    segments: 1,
    now: T0,
  });
  for (let i = 0; i < DEFAULT_LIMITS.maxAttempts; i++) {
    const x = claim(m, 'w', `F${i}`, T0 + i)!;
    t.equal(x.video_id, 'v2');
    run(m, { op: 'taskFailed', taskKey: x.key, leaseId: `F${i}`, reason: 'ffmpeg exited 1', now: T0 + i });
  }
  t.match(m.getVideo('v2'), { status: 'failed', failure: { stage: 'transcode' } });
  t.equal(claim(m, 'w', 'after', T0 + 100), null, 'no task of a failed video is handed out');
  t.equal(m.openTasks('v2').length, 0);
});

t.test('failures: a task released as transient is queued again uncounted, never failing the video', async (t) => {
  const m = new VideoMachine();
  finalized(m, 'u3', 'v3');
  run(m, {
    op: 'probed',
    videoId: 'v3',
    durationS: 10,
    codec: 'h264',
    width: 256,
    height: 144,
    fps: '30',
    hasAudio: true,
    qualities: [Q[0]!],
    segmentS: 30,
    segments: 1,
    now: T0,
  });
  const reason = 'the object stores are unreachable: connect ECONNREFUSED';
  for (let i = 0; i < DEFAULT_LIMITS.maxAttempts + 2; i++) {
    const x = claim(m, 'w', `R${i}`, T0 + i)!;
    t.equal(x.attempts, 1, 'the released attempts were given back');
    run(m, { op: 'taskFailed', taskKey: x.key, leaseId: `R${i}`, reason, now: T0 + i, transient: true });
  }
  t.match(m.getVideo('v3'), { status: 'transcoding' });
  t.match(m.openTasks('v3'), [{ status: 'queued', last_error: reason, attempts: 0 }]);
  // A failure of the source itself still counts: maxAttempts of them fail the video.
  for (let i = 0; i < DEFAULT_LIMITS.maxAttempts; i++) {
    const x = claim(m, 'w', `P${i}`, T0 + 10 + i)!;
    run(m, { op: 'taskFailed', taskKey: x.key, leaseId: `P${i}`, reason: 'ffmpeg exited 1', now: T0 + 10 + i });
  }
  t.match(m.getVideo('v3'), { status: 'failed', failure: { stage: 'transcode' } });
});

t.test('moderation: flag holds playable, clear returns it, take down is final', async (t) => {
  const m = new VideoMachine();
  finalized(m);
  run(m, {
    op: 'probed',
    videoId: 'v1',
    durationS: 10,
    codec: 'h264',
    width: 256,
    height: 144,
    fps: '30',
    hasAudio: true,
    qualities: [Q[0]!],
    segmentS: 30,
    segments: 1,
    now: T0,
  });
  const x = claim(m, 'w', 'L', T0)!;
  run(m, { op: 'complete', taskKey: x.key, leaseId: 'L', output: output('p'), now: T0 });
  run(m, { op: 'published', videoId: 'v1', revision: 1, qualities: ['144p'], manifestPath: 'm', now: T0 });
  run(m, { op: 'moderate', videoId: 'v1', action: 'flag', reason: 'title rule', now: T0 });
  t.match(m.getVideo('v1'), { status: 'flagged', moderation: { action: 'flag' } });
  run(m, { op: 'moderate', videoId: 'v1', action: 'clear', reason: '', now: T0 });
  t.match(m.getVideo('v1'), { status: 'playable', moderation: null });
  run(m, { op: 'moderate', videoId: 'v1', action: 'take_down', reason: 'rule', now: T0 });
  run(m, { op: 'moderate', videoId: 'v1', action: 'clear', reason: '', now: T0 });
  t.match(m.getVideo('v1'), { status: 'taken_down' }, 'a take-down is not undone by clear');
});

t.test(
  'storage tiers with an injected clock: cold after 90 days with few views, restore in a minute, raw deleted after 30 days',
  async (t) => {
    const m = new VideoMachine();
    finalized(m, 'u1', 'quiet');
    finalized(m, 'u2', 'popular');
    for (const id of ['quiet', 'popular']) {
      run(m, {
        op: 'probed',
        videoId: id,
        durationS: 10,
        codec: 'h264',
        width: 256,
        height: 144,
        fps: '30',
        hasAudio: true,
        qualities: [Q[0]!],
        segmentS: 30,
        segments: 1,
        now: T0,
      });
      const x = claim(m, 'w', `L-${id}`, T0)!;
      run(m, { op: 'complete', taskKey: x.key, leaseId: `L-${id}`, output: output('p'), now: T0 + 1000 });
      run(m, { op: 'published', videoId: id, revision: 1, qualities: ['144p'], manifestPath: 'm', now: T0 + 1000 });
    }
    run(m, { op: 'views', videoId: 'popular', count: 5000 });
    t.match(run(m, { op: 'sweep', now: T0 + 29 * DAY }), { cold: [], rawDeleted: [] });
    const d30 = run(m, { op: 'sweep', now: T0 + 30 * DAY + 1000 });
    t.match(
      d30,
      { cold: [], rawDeleted: [{ video_id: 'quiet', raw_path: 'raw/u1' }, { video_id: 'popular' }] },
      'raw sources deleted 30 days after transcode',
    );
    t.match(run(m, { op: 'sweep', now: T0 + 31 * DAY }), { rawDeleted: [] }, 'once');
    t.match(run(m, { op: 'sweep', now: T0 + 89 * DAY }), { cold: [] });
    t.match(run(m, { op: 'sweep', now: T0 + 90 * DAY + 10 }), { cold: ['quiet'] }, 'only the low-view video goes cold');
    t.match(m.getVideo('popular'), { tier: 'warm' });
    run(m, { op: 'restore', videoId: 'quiet', now: T0 + 100 * DAY });
    t.match(m.getVideo('quiet'), { tier: 'restoring', restore_ready_at: T0 + 100 * DAY + 60_000 });
    t.match(m.getVideo('quiet'), { storage: 'packing' }, 'the store move is not confirmed yet');
    t.match(run(m, { op: 'storage', videoId: 'quiet', step: 'packed', objects: 4, bytes: 1000, now: T0 + 100 * DAY }), {
      ok: true,
      video: { storage: 'archived', tier: 'restoring', archive: { objects: 4 } },
    });
    t.match(run(m, { op: 'sweep', now: T0 + 100 * DAY + 3_600_000 }), { cold: [] });
    t.match(m.getVideo('quiet'), { tier: 'restoring' }, 'no clock warms it: only the unpack does');
    t.match(
      run(m, {
        op: 'storage',
        videoId: 'quiet',
        step: 'unpacked',
        objects: 4,
        bytes: 1000,
        now: T0 + 100 * DAY + 5_000,
      }),
      { ok: true, video: { tier: 'warm', storage: 'warm', restore_ready_at: null } },
    );
    t.match(
      run(m, { op: 'storage', videoId: 'quiet', step: 'unpacked', objects: 0, bytes: 0, now: T0 + 100 * DAY + 6_000 }),
      { ok: true },
      'a repeated step is harmless',
    );
    t.match(
      run(m, { op: 'storage', videoId: 'quiet', step: 'packed', objects: 0, bytes: 0, now: T0 + 100 * DAY + 6_000 }),
      { ok: false, video: { storage: 'warm' } },
      'a late pack of a restored video changes nothing',
    );
    t.match(run(m, { op: 'sweep', now: T0 + 101 * DAY }), { cold: [] }, 'a restored video is not sent straight back');
  },
);

t.test('library: newest first, cursor pages, private hidden from others', async (t) => {
  const m = new VideoMachine();
  for (let i = 0; i < 5; i++) {
    run(m, {
      op: 'createUpload',
      uploadId: `u${i}`,
      uploaderId: 'ann',
      idempotencyKey: `k${i}`,
      title: `t${i}`,
      description: '',
      tags: [],
      privacy: i === 2 ? 'private' : 'public',
      totalSize: null,
      now: T0,
    });
    run(m, {
      op: 'finalize',
      uploadId: `u${i}`,
      videoId: `v${i}`,
      totalChunks: 1,
      size: 1,
      sha256: 'b'.repeat(64),
      rawPath: 'r',
      now: T0 + i,
    });
  }
  const first = m.library('ann', 2, null, true);
  t.same(
    first.map((v) => v.video_id),
    ['v4', 'v3'],
  );
  const last = first[first.length - 1]!;
  t.same(
    m.library('ann', 10, { createdAt: last.created_at, videoId: last.video_id }, true).map((v) => v.video_id),
    ['v2', 'v1', 'v0'],
  );
  t.same(
    m.library('ann', 10, null, false).map((v) => v.video_id),
    ['v4', 'v3', 'v1', 'v0'],
  );
});

t.test('snapshot and restore give a machine that behaves the same', async (t) => {
  const m = new VideoMachine();
  finalized(m);
  probed(m, 'v1', 65);
  const a = claim(m, 'w1', 'L1', T0)!;
  run(m, { op: 'complete', taskKey: a.key, leaseId: 'L1', output: output('videos/v1/r1/144p/0'), now: T0 });
  claim(m, 'w1', 'L2', T0);
  const copy = new VideoMachine();
  copy.restore(m.snapshot());
  t.same(copy.snapshot(), m.snapshot());
  t.same(claim(copy, 'w2', 'X', T0 + 1), claim(m, 'w2', 'X', T0 + 1));
  t.equal(copy.segmentsOf('v1', '144p').length, 1);
  t.match(upload(copy, 'u9', 'key-u1'), { created: false, upload: { upload_id: 'u1' } }, 'idempotency keys survive');
});

t.test('malformed commands are refused without a change; valid ones apply', async (t) => {
  const make = (): VideoMachine => {
    const m = new VideoMachine();
    finalized(m);
    probed(m);
    return m;
  };
  const outcome = checkCommandShapes({
    make,
    valid: [
      {
        op: 'createUpload',
        uploadId: 'u5',
        uploaderId: 'a',
        idempotencyKey: 'k',
        title: 't',
        description: '',
        tags: [],
        privacy: 'unlisted',
        totalSize: null,
        now: T0,
      },
      { op: 'claim', workerId: 'w', leaseId: 'l', leaseMs: 1000, now: T0 },
      { op: 'renew', taskKey: 'v1/r1/144p/0', leaseId: 'l', leaseMs: 1000, now: T0 },
      { op: 'sweep', now: T0 },
      { op: 'views', videoId: 'v1', count: 3 },
      { op: 'restore', videoId: 'v1', now: T0 },
      { op: 'reencode', videoId: 'v1', now: T0 },
      { op: 'moderate', videoId: 'v1', action: 'flag', reason: '', now: T0 },
    ],
    malformed: [
      null,
      [],
      'claim',
      { op: 'nope' },
      { op: 'claim', workerId: 'w', leaseId: 'l', leaseMs: 0, now: T0 },
      {
        op: 'createUpload',
        uploadId: 'u5',
        uploaderId: 'a',
        idempotencyKey: 'k',
        title: 't',
        description: '',
        tags: [],
        privacy: 'secret',
        totalSize: null,
        now: T0,
      },
    ],
  });
  t.equal(outcome.violation, null);
  t.ok(outcome.refused > 0);
});

t.test(
  'a failed re-encode leaves the previous revision playable (probe failure, then every quality failing)',
  async (t) => {
    const m = new VideoMachine();
    finalized(m, 'u1', 'v1');
    run(m, {
      op: 'probed',
      videoId: 'v1',
      durationS: 10,
      codec: 'h264',
      width: 256,
      height: 144,
      fps: '30',
      hasAudio: true,
      qualities: [Q[0]!],
      segmentS: 30,
      segments: 1,
      now: T0,
    });
    const x = claim(m, 'w', 'L', T0)!;
    run(m, { op: 'complete', taskKey: x.key, leaseId: 'L', output: output('p'), now: T0 });
    run(m, {
      op: 'published',
      videoId: 'v1',
      revision: 1,
      qualities: ['144p'],
      manifestPath: 'videos/v1/r1/master.m3u8',
      now: T0,
    });
    run(m, { op: 'thumbnails', videoId: 'v1', paths: ['a', 'b', 'c', 'd', 'e'] });
    t.match(run(m, { op: 'reencode', videoId: 'v1', now: T0 }), {
      ok: true,
      video: { revision: 2, stage: 'probe', status: 'playable' },
    });
    t.match(run(m, { op: 'fail', videoId: 'v1', stage: 'probe', reason: 'unreadable: gone', now: T0 + 1 }), {
      ok: true,
    });
    t.match(m.getVideo('v1'), {
      status: 'playable',
      stage: null,
      revision: 1,
      manifest_path: 'videos/v1/r1/master.m3u8',
      failure: null,
      poster_path: 'c',
      qualities: [{ name: '144p', published: true }],
      reencode_failure: { revision: 2, stage: 'probe' },
    });

    t.match(
      run(m, { op: 'reencode', videoId: 'v1', now: T0 + 2 }),
      { ok: true, video: { revision: 3 } },
      'a revision number is never reused',
    );
    run(m, {
      op: 'probed',
      videoId: 'v1',
      durationS: 10,
      codec: 'h264',
      width: 256,
      height: 144,
      fps: '30',
      hasAudio: true,
      qualities: [Q[0]!],
      segmentS: 30,
      segments: 1,
      now: T0 + 3,
    });
    for (let i = 0; i < 3; i++) {
      const task = claim(m, 'w', `F${i}`, T0 + 10 + i)!;
      t.equal(task.revision, 3);
      run(m, { op: 'taskFailed', taskKey: task.key, leaseId: `F${i}`, reason: 'ffmpeg exited 1', now: T0 + 10 + i });
    }
    t.match(
      m.getVideo('v1'),
      {
        status: 'playable',
        stage: null,
        revision: 1,
        manifest_path: 'videos/v1/r1/master.m3u8',
        reencode_failure: { revision: 3, stage: 'transcode' },
      },
      'every new quality failed: still revision 1, never failed',
    );
    t.equal(m.openTasks('v1').length, 0);
  },
);

t.test(
  'the per-user transcode budget: decided at probed in log order, by the window of entry times, kept in snapshots',
  async (t) => {
    const m = new VideoMachine();
    const budget = { seconds: 100, windowMs: 3_600_000 };
    const probedAt = (video: string, duration: number, now: number): VideoResult =>
      run(m, {
        op: 'probed',
        videoId: video,
        durationS: duration,
        codec: 'h264',
        width: 320,
        height: 240,
        fps: '30',
        hasAudio: true,
        qualities: Q,
        segmentS: 30,
        segments: Math.ceil(duration / 30),
        now,
        budget,
      });
    finalized(m, 'u1', 'v1');
    finalized(m, 'u2', 'v2');
    finalized(m, 'u3', 'v3');
    finalized(m, 'u4', 'v4', 'bob');
    t.match(
      probedAt('v1', 60, T0 + 10),
      { ok: true, video: { status: 'transcoding', stage: 'transcode' } },
      '60 s of 100: accepted',
    );
    t.match(
      probedAt('v2', 41, T0 + 20),
      {
        ok: true,
        video: {
          status: 'failed',
          failure: { stage: 'probe', reason: /^over_budget: 41\.0 s of source would bring ann to 101\.0 s/ },
        },
      },
      '60 + 41 > 100: refused',
    );
    t.equal(m.openTasks('v2').length, 0, 'nothing queued for the refused source');
    t.match(
      probedAt('v4', 90, T0 + 20),
      { ok: true, video: { status: 'transcoding' } },
      "another user's budget is their own",
    );
    t.same(
      m.transcodeUsage('ann', T0 + 20, budget.windowMs),
      { seconds: 60, freesAt: T0 + 10 + budget.windowMs },
      'a refused source costs nothing',
    );
    const copy = new VideoMachine();
    copy.restore(m.snapshot());
    t.same(
      copy.transcodeUsage('ann', T0 + 20, budget.windowMs),
      m.transcodeUsage('ann', T0 + 20, budget.windowMs),
      'the usage survives a snapshot',
    );
    // An hour after the first source it leaves the window: the same 41 s now fits.
    t.match(
      probedAt('v3', 41, T0 + 10 + budget.windowMs),
      { ok: true, video: { status: 'transcoding' } },
      'accepted once the window moved on',
    );
    t.same(m.transcodeUsage('ann', T0 + 10 + budget.windowMs, budget.windowMs).seconds, 41);
  },
);

t.test(
  'object placement: recorded with the upload, inherited by its video, listed per store, kept in snapshots',
  async (t) => {
    const m = new VideoMachine();
    const placed = (id: string, stores: string[] | undefined): void => {
      run(m, {
        op: 'createUpload',
        uploadId: id,
        uploaderId: 'ann',
        idempotencyKey: `key-${id}`,
        title: 'T',
        description: '',
        tags: [],
        privacy: 'public',
        totalSize: null,
        now: T0,
        ...(stores !== undefined ? { stores } : {}),
      });
    };
    placed('u1', ['store2', 'store3', 'store1']);
    placed('u2', ['store1', 'store4', 'store5']);
    placed('u3', undefined);
    t.same(m.getUpload('u1')!.stores, ['store2', 'store3', 'store1']);
    t.equal(m.getUpload('u3')!.stores, null, 'no placement in the command: null (the single store, store1)');
    run(m, {
      op: 'finalize',
      uploadId: 'u1',
      videoId: 'v1',
      totalChunks: 1,
      size: 10,
      sha256: 'a'.repeat(64),
      rawPath: 'raw/u1',
      now: T0 + 1,
    });
    t.same(m.getVideo('v1')!.stores, ['store2', 'store3', 'store1'], "the video lives on its upload's stores");
    t.same(m.placementOf('store2'), { uploads: ['u1'], videos: ['v1'] });
    t.same(m.placementOf('store1'), { uploads: ['u1', 'u2', 'u3'], videos: ['v1'] }, 'a record without one: store1');
    t.same(m.placementOf('store4'), { uploads: ['u2'], videos: [] });
    const copy = new VideoMachine();
    copy.restore(m.snapshot());
    t.same(copy.placementOf('store3'), m.placementOf('store3'), 'the placement survives a snapshot');
    // A snapshot from before replication (no `stores` on its records) restores with null placements.
    const old = JSON.parse(Buffer.from(m.snapshot()).toString('utf8')) as {
      uploads: Array<Record<string, unknown>>;
      videos: Array<Record<string, unknown>>;
    };
    for (const r of [...old.uploads, ...old.videos]) delete r.stores;
    const older = new VideoMachine();
    older.restore(Buffer.from(JSON.stringify(old)));
    t.equal(older.getVideo('v1')!.stores, null);
    t.same(older.placementOf('store1').videos, ['v1']);
    t.throws(() => placed('u4', ['store1', 7 as unknown as string]), 'a placement is a list of store ids');
  },
);

t.test('rendezvous placement: N distinct stores, the same for an id every time, spread evenly', async (t) => {
  const stores = ['store1', 'store2', 'store3', 'store4', 'store5'];
  const counts = new Map(stores.map((s) => [s, 0]));
  for (let i = 0; i < 1000; i++) {
    const placed = placeReplicas(`upload-${i}`, stores, 3);
    if (new Set(placed).size !== 3) t.fail(`upload-${i}: ${placed.join(',')}`);
    for (const s of placed) counts.set(s, counts.get(s)! + 1);
  }
  t.same(placeReplicas('abc', stores, 3), placeReplicas('abc', [...stores].reverse(), 3), 'independent of order');
  for (const [s, n] of counts) t.ok(n > 500 && n < 700, `${s} holds ${n} of 3000 copies (600 each if even)`);
  t.same(placeReplicas('abc', ['store1'], 3), ['store1'], 'never more than the stores');
  t.equal(replicaCount({}, 3), 3);
  t.equal(replicaCount({}, 1), 1, 'one store: one copy by default');
  t.equal(replicaCount({ object_replicas: '1' }, 3), 1);
  t.throws(() => replicaCount({ object_replicas: '4' }, 3), /at most|1 to the store count/);
  t.equal(majority(3), 2);
  t.equal(majority(1), 1);
});
