import t from 'tap';
import type { HistoryEvent } from '../src/history.js';
import { checkVideo, parsePlaylist } from '../src/workloads/video-checks.js';

const MS = 1e6;
const SHA = 'a'.repeat(64);

function history() {
  const events: HistoryEvent[] = [];
  let clock = 0;
  let proc = 0;
  const op = (f: string, key: string | undefined, input: unknown, type: 'ok' | 'fail' | 'info', value?: unknown) => {
    const p = proc++;
    events.push({ process: p, type: 'invoke', f, ...(key ? { key } : {}), value: input, time: (clock += 10 * MS) });
    events.push({ process: p, type, f, ...(key ? { key } : {}), value, time: (clock += 10 * MS) });
  };
  return {
    events,
    upload(key: string, video: string | null, checksum = SHA): void {
      op(
        'upload',
        key,
        { clip: 'clip0', sha256: SHA, size: 100 },
        video === null ? 'info' : 'ok',
        video === null ? undefined : { video_id: video, upload_id: `up-${video}`, size: 100, checksum },
      );
    },
    play(key: string, value: Record<string, unknown>): void {
      op('final-play', key, { video_id: value.video_id }, 'ok', value);
    },
  };
}

/** A video that played: master with one variant, its init and two segments, each matching the store. */
function good(video: string, patch: Record<string, unknown> = {}) {
  const obj = (k: string): [string, string, string] => [`videos/${video}/r1/${k}`, `h-${k}`, `h-${k}`];
  return {
    video_id: video,
    status: 'playable',
    stage: null,
    raw_sha256: SHA,
    master: 1,
    variants: [2],
    objects: [obj('master.m3u8'), obj('144p/index.m3u8'), obj('144p/init.mp4'), obj('144p/seg-00001.m4s')],
    errors: [],
    ...patch,
  };
}

const named = (rs: ReturnType<typeof checkVideo>, name: string) => rs.find((r) => r.name === name)!;

t.test('every acknowledged upload plays, every object matches: valid', async (t) => {
  const h = history();
  h.upload('v0', null);
  h.upload('v0', 'V0');
  h.upload('v1', 'V1');
  h.upload('v2', null);
  h.play('v0', good('V0'));
  h.play('v1', good('V1'));
  const rs = checkVideo(h.events);
  for (const r of rs) t.equal(r.valid, true, r.name);
  t.equal(named(rs, 'video-playable').stats?.played, 2);
  t.equal(named(rs, 'video-checksums').stats?.objects_checked, 8);
});

t.test('a video lost, one left transcoding, one whose segment does not fetch', async (t) => {
  const h = history();
  h.upload('v0', 'V0');
  h.upload('v1', 'V1');
  h.upload('v2', 'V2');
  h.play('v0', { video_id: 'V0', status: 'missing', errors: [], objects: [] });
  h.play('v1', good('V1', { status: 'transcoding', stage: 'transcode' }));
  h.play('v2', good('V2', { errors: ['/media/videos/V2/r1/144p/seg-00001.m4s: HTTP 404'] }));
  const r = named(checkVideo(h.events), 'video-playable');
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['lost', 'not-playable', 'unplayable'],
  );
});

t.test('an acknowledged upload never read back: unknown', async (t) => {
  const h = history();
  h.upload('v0', 'V0');
  t.equal(named(checkVideo(h.events), 'video-playable').valid, 'unknown');
});

t.test(
  'a raw source that is not the clip, a lost one, an ack with another checksum, two videos of one key',
  async (t) => {
    const h = history();
    h.upload('v0', 'V0');
    h.upload('v1', 'V1');
    h.upload('v2', 'V2', 'b'.repeat(64));
    h.upload('v3', 'V3');
    h.upload('v3', 'V4');
    h.play('v0', good('V0', { raw_sha256: 'c'.repeat(64) }));
    h.play('v1', good('V1', { raw_sha256: null }));
    h.play('v2', good('V2'));
    h.play('v3', good('V3'));
    const r = named(checkVideo(h.events), 'video-chunks');
    t.equal(r.valid, false);
    t.same(
      new Set(r.anomalies.map((a) => a.type)),
      new Set(['ack-mismatch', 'two-videos', 'raw-mismatch', 'raw-lost']),
    );
  },
);

t.test('an edge serving bytes that are not the store object, an object gone from the store', async (t) => {
  const h = history();
  h.upload('v0', 'V0');
  const v = good('V0');
  v.objects[3] = ['videos/V0/r1/144p/seg-00001.m4s', 'h-x', 'h-y'];
  v.objects[2] = ['videos/V0/r1/144p/init.mp4', 'h-z', null as unknown as string];
  h.play('v0', v);
  const r = named(checkVideo(h.events), 'video-checksums');
  t.equal(r.valid, false);
  t.same(
    r.anomalies.map((a) => a.type),
    ['store-lost', 'wrong-checksum'],
  );
});

t.test('playlists: a master, a media playlist, and broken ones', async (t) => {
  t.same(parsePlaylist('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n144p/index.m3u8\n'), {
    kind: 'master',
    uris: ['144p/index.m3u8'],
  });
  t.same(
    parsePlaylist(
      '#EXTM3U\n#EXT-X-MAP:URI="init.mp4"\n#EXTINF:2.0,\nseg-00001.m4s\n#EXTINF:1.0,\nseg-00002.m4s\n#EXT-X-ENDLIST\n',
    ),
    { kind: 'media', map: 'init.mp4', uris: ['seg-00001.m4s', 'seg-00002.m4s'] },
  );
  t.equal(parsePlaylist('<html>').kind, 'invalid');
  t.equal(parsePlaylist('#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n').kind, 'invalid');
  t.equal(parsePlaylist('#EXTM3U\n#EXTINF:2.0,\nseg-00001.m4s\n').kind, 'invalid', 'no ENDLIST: cut short');
  t.equal(parsePlaylist('#EXTM3U\n#EXTINF:2.0,\n#EXT-X-ENDLIST\n').kind, 'invalid');
});
