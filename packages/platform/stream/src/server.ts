/** Serves a StreamLog and its OffsetStore over @raftkit/rpc (the calls are in protocol.ts). */
import type { Logger, MetricsRegistry } from '@raftkit/http';
import { RpcError, serveRpc, type RpcServer } from '@raftkit/rpc';
import type { StreamLog } from './log.js';
import { CONSUMER_NAME, type OffsetStore } from './offsets.js';
import { MAX_FRAME_BYTES, parseRequest, type Answer, type Answers, type Request } from './protocol.js';

/** A connection that has not said hello by then is closed: silent sockets must not hold descriptors. */
const HELLO_TIMEOUT_MS = 10_000;

export interface StreamServerOptions {
  log: StreamLog;
  offsets: OffsetStore;
  /** Cluster tokens a client may present in its hello (the current one first). */
  tokens: string[];
  host: string;
  port: number;
  logger?: Logger;
  metrics?: MetricsRegistry;
  /** Longest a fetch may wait for records (default 30 s). */
  maxWaitMs?: number;
}

export class StreamServer {
  private constructor(private readonly rpc: RpcServer) {}

  get port(): number {
    return this.rpc.port;
  }

  static async listen(options: StreamServerOptions): Promise<StreamServer> {
    const { log, offsets } = options;
    const maxWaitMs = options.maxWaitMs ?? 30_000;
    const appended = options.metrics?.counter(
      'stream_records_appended_total',
      'Records made durable by produce requests',
    );
    const fetched = options.metrics?.counter('stream_records_fetched_total', 'Records served to consumers');
    options.metrics?.gauge('stream_end_offset', 'Offset the next durable record will get').set(() => log.endOffset);
    options.metrics?.gauge('stream_start_offset', 'Offset of the oldest retained record').set(() => log.startOffset);
    options.metrics?.gauge('stream_bytes', 'Bytes in retained segments').set(() => log.sizeBytes);

    const read = async (req: Extract<Request, { t: 'fetch' }>): Promise<Answers['fetch']> => {
      let result;
      try {
        result = await log.read(req.offset, req.max, req.maxBytes);
      } catch (e) {
        throw new RpcError('read_failed', (e as Error).message, 500);
      }
      fetched?.inc(result.records.length);
      return { offset: result.offset, records: result.records, start: log.startOffset, end: log.endOffset };
    };

    /** Long poll: answers as soon as `max` records exist, or with whatever exists when the wait ends or the client leaves. */
    const fetch = (req: Extract<Request, { t: 'fetch' }>, signal: AbortSignal): Promise<Answers['fetch']> => {
      const waitMs = Math.min(req.waitMs ?? 0, maxWaitMs);
      const ready = () => log.endOffset - Math.max(req.offset, log.startOffset) >= req.max;
      if (waitMs === 0 || ready()) return read(req);
      return new Promise<void>((resolve) => {
        const done = () => {
          unsubscribe();
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const unsubscribe = log.onDurable(() => {
          if (ready()) done();
        });
        const timer = setTimeout(done, waitMs);
        signal.addEventListener('abort', done, { once: true });
      }).then(() => read(req));
    };

    const rpc = await serveRpc<Request, Answer>({
      address: `${options.host}:${options.port}`,
      tokens: options.tokens,
      admits: 'cluster',
      name: 'stream',
      maxFrameBytes: MAX_FRAME_BYTES,
      // A fetch answer may be as large as a frame; a client is cut off only when it leaves two unread.
      maxQueuedOutputBytes: 2 * MAX_FRAME_BYTES,
      helloTimeoutMs: HELLO_TIMEOUT_MS,
      ...(options.metrics !== undefined ? { metrics: options.metrics } : {}),
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
      parse: parseRequest,
      handler: async (req, { signal }) => {
        switch (req.t) {
          case 'produce': {
            let offset: number;
            try {
              offset = await log.append(req.records);
            } catch (e) {
              throw new RpcError(
                e instanceof RangeError ? 'bad_request' : 'append_failed',
                (e as Error).message,
                e instanceof RangeError ? 400 : 500,
              );
            }
            appended?.inc(req.records.length);
            return { offset, count: req.records.length };
          }
          case 'fetch':
            return fetch(req, signal);
          case 'commit':
            if (!CONSUMER_NAME.test(req.consumer))
              throw new RpcError('bad_request', 'consumer must match ' + CONSUMER_NAME.source);
            try {
              await offsets.commit(req.consumer, req.offset);
            } catch (e) {
              throw new RpcError('commit_failed', (e as Error).message, 500);
            }
            return { offset: req.offset };
          case 'committed':
            return { offset: offsets.get(req.consumer) };
        }
      },
    });
    return new StreamServer(rpc);
  }

  /** Stops accepting, cuts every client off and waits for the listener to close. */
  close(): Promise<void> {
    return this.rpc.close();
  }
}
