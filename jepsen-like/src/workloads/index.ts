import { fileURLToPath } from 'node:url';
import { CollabWorkload } from './collab.js';
import { AuctionWorkload } from './auction.js';
import { DEFAULT_FLASH_OPTIONS, FlashWorkload } from './flash.js';
import { DEFAULT_KV_OPTIONS, KvWorkload } from './kv.js';
import { DEFAULT_LOCK_OPTIONS, LockWorkload } from './lock.js';
import { DEFAULT_LOG_OPTIONS, LogWorkload } from './log.js';
import { FeedWorkload } from './feed.js';
import { NotifyWorkload } from './notify.js';
import { RateLimitWorkload } from './ratelimit.js';
import { ShortlinkWorkload } from './shortlink.js';
import { VideoWorkload } from './video.js';
import type { Workload } from './workload.js';

/**
 * Every workload, by name. A later service adds one line. "feed-one-app" (one app worker: every read through the post
 * cache the delete itself updates) and "video-members" (faults on the metadata members only, to tell the members'
 * faults from the object stores' when `video` fails) are narrower setups of their workloads. The
 * "-serializable", "-unfenced", "-async-inventory" and "-overshare" variants are broken on purpose (stale reads; a
 * resource that ignores tokens; flash gateways answering before the log commits; a rule whose fallback shares add up
 * to 3 x its limit): they show the checks catching real anomalies.
 */
export const WORKLOADS: Record<string, () => Workload> = {
  kv: () => new KvWorkload(),
  lock: () => new LockWorkload(),
  shortlink: () => new ShortlinkWorkload(),
  log: () => new LogWorkload(),
  collab: () => new CollabWorkload(),
  auction: () => new AuctionWorkload(),
  flash: () => new FlashWorkload(),
  ratelimit: () => new RateLimitWorkload(),
  feed: () => new FeedWorkload(),
  notify: () => new NotifyWorkload(),
  video: () => new VideoWorkload(),
  'video-members': () => new VideoWorkload(false, 'video-members'),
  'feed-one-app': () => new FeedWorkload(1, 'feed-one-app'),
  'ratelimit-overshare': () => new RateLimitWorkload({ expectedInstances: 1 }, 'ratelimit-overshare'),
  'kv-serializable': () => new KvWorkload({ ...DEFAULT_KV_OPTIONS, serializableReads: true }),
  'lock-unfenced': () => new LockWorkload({ ...DEFAULT_LOCK_OPTIONS, fenced: false }),
  'flash-async-inventory': () =>
    new FlashWorkload(
      {
        ...DEFAULT_FLASH_OPTIONS,
        gatewayScript: fileURLToPath(new URL('../variants/flash-async-gateway.js', import.meta.url)),
      },
      'flash-async-inventory',
    ),
  'log-same-offset': () =>
    new LogWorkload({ ...DEFAULT_LOG_OPTIONS, sameOffsetIsOwn: true, fixedFetch: true, foreignProbability: 0.5 }),
};

export function makeWorkload(name: string): Workload {
  const make = WORKLOADS[name];
  if (make === undefined)
    throw new Error(`no workload ${JSON.stringify(name)} (known: ${Object.keys(WORKLOADS).join(', ')})`);
  return make();
}
