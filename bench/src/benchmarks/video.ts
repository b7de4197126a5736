/**
 * `video`: the video service's two benchmarks in one run (issue 18): the transcode part (video-transcode.ts,
 * s30-media: time to playable and total transcode time vs one ffmpeg ladder command) and the delivery part
 * (video-delivery.ts, s30-video-edge: segment GETs through an edge vs nginx, the stampede's origin fetches).
 * `--vs ffmpeg-ladder,nginx` runs both peers. The headline figures (req/s, p99) are the delivery part's; the
 * transcode figures sit under `transcode` on each side, and both parts' goals are judged.
 */
import type { Benchmark, RunOptions, SideResult } from '../benchmark.js';
import { runDeliveryOurs, runDeliveryPeer, videoDeliveryBenchmark } from './video-delivery.js';
import { runTranscodeOurs, runTranscodePeer, transcodeGoals, videoTranscodeBenchmark } from './video-transcode.js';

const PEERS = 'ffmpeg-ladder,nginx';

export const videoBenchmark: Benchmark = {
  name: 'video',
  description: `${videoTranscodeBenchmark.description}; then ${videoDeliveryBenchmark.description}`,
  title: (o) => `video: ${videoTranscodeBenchmark.title(o)}; ${videoDeliveryBenchmark.title(o)}`,
  peers: [PEERS],
  defaults: videoDeliveryBenchmark.defaults,
  workload: (o: RunOptions) => ({
    transcode: videoTranscodeBenchmark.workload(o),
    delivery: videoDeliveryBenchmark.workload(o),
  }),
  goals: (ours, peer) => [
    ...transcodeGoals(ours.transcode as SideResult, (peer?.transcode as SideResult | undefined) ?? null),
    ...(videoDeliveryBenchmark.goals?.(ours, peer) ?? []),
  ],
  runOurs: async (o) => {
    const transcode = await runTranscodeOurs(o);
    const delivery = await runDeliveryOurs(o);
    return { ...delivery, system: `${delivery.system}; transcode: ${transcode.system}`, transcode };
  },
  runPeer: async (peer, o) => {
    if (peer !== PEERS) throw new Error(`video compares with ${PEERS}`);
    const transcode = await runTranscodePeer('ffmpeg-ladder', o);
    const delivery = await runDeliveryPeer('nginx', o);
    return { ...delivery, system: `${delivery.system}; transcode: ${transcode.system}`, transcode };
  },
};
