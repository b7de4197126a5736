/**
 * The `notify` benchmark's baseline, the naive design: one FIFO queue per channel carrying every priority in
 * arrival order, read by one lane, so a critical message waits behind every bulk message queued before it. A
 * QueueLayout of @raftkit/notify, passed to the service's own router and channel workers by
 * notify-fifo-worker.ts; the service itself runs only its priority layout.
 */
import type { LogClient } from '@raftkit/log';
import { CHANNELS, type QueueLayout } from '@raftkit/notify';

export const FIFO_LAYOUT: QueueLayout = {
  topic: (_priority, channel) => `notify-fifo-${channel}`,
  // One lane on the one topic (every priority reads the same topic; `low` names it).
  lanes: [{ priorities: ['low'], longPoll: false }],
  async setup(log: LogClient): Promise<void> {
    // As the members create the design's channel topics: one partition, three replicas (idempotent).
    for (const channel of CHANNELS) await log.createTopic(`notify-fifo-${channel}`, { partitions: 1, replicas: 3 });
  },
};
