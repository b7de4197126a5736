/** Every benchmark the harness knows, by name. A new benchmark adds one line here. */
import type { Benchmark } from './benchmark.js';
import { cliBenchmark } from './benchmarks/cli.js';
import { collabBenchmark } from './benchmarks/collab.js';
import { auctionBenchmark } from './benchmarks/auction.js';
import { crdtBenchmark } from './benchmarks/crdt.js';
import { feedBenchmark } from './benchmarks/feed.js';
import { flashBenchmark } from './benchmarks/flash.js';
import { groupsBenchmark } from './benchmarks/groups.js';
import { idleBenchmark } from './benchmarks/idle.js';
import { kvBenchmark } from './benchmarks/kv.js';
import { lockBenchmark } from './benchmarks/lock.js';
import { logBenchmark } from './benchmarks/log.js';
import { notifyBenchmark } from './benchmarks/notify.js';
import { ratelimitBenchmark } from './benchmarks/ratelimit.js';
import { shortlinkBenchmark } from './benchmarks/shortlink.js';
import { videoDeliveryBenchmark } from './benchmarks/video-delivery.js';
import { videoTranscodeBenchmark } from './benchmarks/video-transcode.js';
import { videoBenchmark } from './benchmarks/video.js';
import { raftBenchmark } from './raft-inprocess.js';

export const benchmarks: Record<string, Benchmark> = {
  cli: cliBenchmark,
  collab: collabBenchmark,
  auction: auctionBenchmark,
  crdt: crdtBenchmark,
  feed: feedBenchmark,
  flash: flashBenchmark,
  groups: groupsBenchmark,
  idle: idleBenchmark,
  kv: kvBenchmark,
  lock: lockBenchmark,
  log: logBenchmark,
  notify: notifyBenchmark,
  raft: raftBenchmark,
  ratelimit: ratelimitBenchmark,
  shortlink: shortlinkBenchmark,
  'video-delivery': videoDeliveryBenchmark,
  'video-transcode': videoTranscodeBenchmark,
  video: videoBenchmark,
};
