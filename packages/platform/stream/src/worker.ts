/**
 * A stream as a cluster worker: segments and consumer offsets in the worker's data dir, the TCP protocol on its
 * second listener, /healthz and /metrics on HTTP. Settings (all optional): stream_segment_bytes,
 * stream_commit_ms, stream_retain_bytes, stream_retain_segments.
 */
import { join } from 'node:path';
import { hostPort, serveWorkerHttp, type RunningWorker, type WorkerOptions } from '@raftkit/http';
import { StreamLog } from './log.js';
import { OffsetStore } from './offsets.js';
import { StreamServer } from './server.js';

export async function startStreamWorker(options: WorkerOptions): Promise<RunningWorker> {
  const setting = (name: string): number | undefined => {
    const raw = options.settings[name];
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < 0)
      throw new RangeError(`setting ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
    return value;
  };
  const log = await StreamLog.open({
    dir: join(options.dataDir, 'segments'),
    segmentBytes: setting('stream_segment_bytes'),
    commitIntervalMs: setting('stream_commit_ms'),
    retainBytes: setting('stream_retain_bytes'),
    retainSegments: setting('stream_retain_segments'),
  });
  if (log.truncatedBytes > 0) options.logger.log('warn', 'torn tail truncated', { bytes: log.truncatedBytes });
  const offsets = await OffsetStore.open(join(options.dataDir, 'offsets'));
  const http = await serveWorkerHttp(options, {
    health: () => ({
      start: log.startOffset,
      end: log.endOffset,
      segments: log.segmentCount,
      consumers: offsets.all(),
    }),
  });
  const [host, port] = hostPort(options.tcpAddress);
  const server = await StreamServer.listen({
    log,
    offsets,
    tokens: options.tokens,
    host,
    port,
    logger: options.logger,
    metrics: http.metrics,
  });
  options.logger.log('info', 'stream serving', { tcp: options.tcpAddress, start: log.startOffset, end: log.endOffset });
  return {
    httpPort: http.port,
    stop: async () => {
      await server.close();
      await http.close();
      await log.close();
    },
  };
}
