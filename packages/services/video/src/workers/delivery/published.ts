/**
 * What a cache tier may serve: the published outputs of a video that is watchable, nothing else. A tier fetches
 * from the object store with the cluster token, which opens every key (raw uploads included), so without this
 * check an edge served `raw/<upload_id>` byte for byte and kept serving a taken-down video from its cache.
 *
 * The rule (`servable`), on the video's metadata record:
 *   - only keys `videos/<video_id>/r<revision>/<path>`; anything else (raw/, uploads, cold/) is never served;
 *   - the video is `playable` (not transcoding, flagged, failed nor taken down), the key is under the revision that
 *     plays (the previous one while a re-encode has published nothing yet), and the path is the master or the MPD,
 *     a published quality's folder, thumbs/ or captions/;
 *   - also, while `transcoding` or `playable`, the images and captions the record names (the poster shows before
 *     playable, and a re-encode's new thumbnails before its revision plays).
 *
 * Records come from the metadata members, cached per video for `ttlMs` (5 s by default) and dropped by every purge
 * of the video's prefix: a take-down (or flag) purges every tier at once, and a tier that missed the purge (down at
 * that moment) refuses within the TTL. A record that says taken down also drops the tier's cached objects.
 */
import { HttpError, notFound } from '@raftkit/http';
import type { Video } from '../../machine.js';

/** The metadata record of a video, or null when there is no such video. */
export type RecordSource = (videoId: string) => Promise<Video | null>;

interface PublishedOptions {
  source: RecordSource;
  /** How long a record is trusted without asking again (ms). */
  ttlMs: number;
  /** When the members cannot be asked, an expired record this young still decides (ms). */
  staleIfErrorMs?: number;
  /** Records kept at most (the oldest is dropped first). */
  maxRecords?: number;
  /** Called when a fetched record says the video is gone for good (taken down): drop its cached objects. */
  onGone?: (videoId: string) => void;
  clock?: () => number;
}

const KEY = /^videos\/([A-Za-z0-9_-]{1,128})\/r(\d{1,9})\/(.+)$/;

/** Why a key is refused: the same 404 for every case, so a refusal tells nothing of what exists. */
function refused(key: string): HttpError {
  return notFound(`no published object ${key}`, { key });
}

/** True when `key` is an object a viewer may get for video `v` (the rule in the header). */
export function servable(key: string, v: Video): boolean {
  const m = KEY.exec(key);
  if (m === null || m[1] !== v.video_id) return false;
  if (v.status !== 'playable' && v.status !== 'transcoding') return false;
  // The images and captions the record names: a poster shows before playable and during a re-encode.
  if (key === v.poster_path || key === v.captions_path || v.thumbnails.includes(key)) return true;
  if (v.status !== 'playable' || v.manifest_path === null) return false;
  const playing = v.previous ?? v;
  if (Number(m[2]) !== playing.revision) return false;
  const path = m[3]!;
  if (path === 'master.m3u8' || path === 'manifest.mpd' || path.startsWith('thumbs/') || path.startsWith('captions/'))
    return true;
  const folder = path.split('/')[0]!;
  return path.includes('/') && playing.qualities.some((q) => q.published && q.name === folder);
}

interface Entry {
  video: Video | null;
  at: number;
}

export class PublishedCheck {
  private readonly records = new Map<string, Entry>();
  private readonly loading = new Map<string, Promise<Entry>>();
  private readonly clock: () => number;
  /** Bumped by every forget: a fetch that started before it must not store what it read. */
  private epoch = 0;
  readonly counts = { fetches: 0, refused: 0, failures: 0 };

  constructor(private readonly o: PublishedOptions) {
    this.clock = o.clock ?? Date.now;
  }

  /**
   * Returns when `key` may be served (undefined: decided at once from a fresh record, the hot path of a cache hit;
   * a promise: the record is being read). Throws, or rejects with, a 404 when it may not be served, a 503 when no
   * record can be had.
   */
  check(key: string): Promise<void> | undefined {
    const m = KEY.exec(key);
    if (m === null) {
      this.counts.refused++;
      throw refused(key);
    }
    const videoId = m[1]!;
    const cached = this.records.get(videoId);
    if (cached !== undefined && this.clock() - cached.at < this.o.ttlMs) {
      this.decide(key, cached);
      return undefined;
    }
    return this.record(videoId, cached).then((entry) => this.decide(key, entry));
  }

  private decide(key: string, entry: Entry): void {
    if (entry.video === null || !servable(key, entry.video)) {
      this.counts.refused++;
      throw refused(key);
    }
  }

  /** Drops the records a purge of `prefix` concerns (one video's, or all for a prefix above the videos). */
  forget(prefix: string): void {
    this.epoch++;
    const parts = prefix.split('/');
    if (parts[0] !== 'videos') return;
    const id = parts[1] ?? '';
    // A read in flight began before the purge: later requests must not wait on it, they read the record anew.
    if (id === '') {
      this.records.clear();
      this.loading.clear();
    } else {
      this.records.delete(id);
      this.loading.delete(id);
    }
  }

  /** The video's record read again (one read per video at a time, however many requests wait for it). */
  private record(videoId: string, cached: Entry | undefined): Promise<Entry> {
    const loading = this.loading.get(videoId);
    if (loading !== undefined) return loading;
    const pending = this.fetch(videoId, cached);
    this.loading.set(videoId, pending);
    const done = (): void => {
      if (this.loading.get(videoId) === pending) this.loading.delete(videoId);
    };
    pending.then(done, done);
    return pending;
  }

  private async fetch(videoId: string, stale: Entry | undefined): Promise<Entry> {
    const epoch = this.epoch;
    this.counts.fetches++;
    let video: Video | null;
    try {
      video = await this.o.source(videoId);
    } catch (error) {
      this.counts.failures++;
      if (stale !== undefined && this.clock() - stale.at < (this.o.staleIfErrorMs ?? 60_000)) return stale;
      throw new HttpError(
        503,
        'metadata_unavailable',
        `cannot tell whether video ${videoId} is published: ${(error as Error).message}`,
        {},
        { 'retry-after': '1' },
      );
    }
    const entry: Entry = { video, at: this.clock() };
    if (epoch === this.epoch) {
      this.records.delete(videoId);
      this.records.set(videoId, entry);
      const max = this.o.maxRecords ?? 100_000;
      if (this.records.size > max) this.records.delete(this.records.keys().next().value!);
    }
    if (video?.status === 'taken_down') this.o.onGone?.(videoId);
    return entry;
  }
}
