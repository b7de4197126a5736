/** Serves a StreamLog and its OffsetStore over the TCP protocol (see protocol.ts). */
import { timingSafeEqual, createHash } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { FrameDecoder, limitServer, type Logger, type MetricsRegistry } from '@raftkit/http';
import type { StreamLog } from './log.js';
import { CONSUMER_NAME, type OffsetStore } from './offsets.js';
import { decodeFrame, encodeFrame, MAX_FRAME_BYTES, MAX_HELLO_FRAME_BYTES, parseRequest, type Request, type Response } from './protocol.js';

/** A connection that has not said hello by then is closed: silent sockets must not hold descriptors. */
const HELLO_TIMEOUT_MS = 10_000;

export interface StreamServerOptions {
  log: StreamLog;
  offsets: OffsetStore;
  /** Tokens a client may present in its hello. */
  tokens: string[];
  host: string;
  port: number;
  logger?: Logger;
  metrics?: MetricsRegistry;
  /** Longest a fetch may wait for records (default 30 s). */
  maxWaitMs?: number;
}

export class StreamServer {
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async listen(options: StreamServerOptions): Promise<StreamServer> {
    const { log, offsets } = options;
    const maxWaitMs = options.maxWaitMs ?? 30_000;
    const digests = options.tokens.map(digest);
    const appended = options.metrics?.counter('stream_records_appended_total', 'Records made durable by produce requests');
    const fetched = options.metrics?.counter('stream_records_fetched_total', 'Records served to consumers');
    const refused = options.metrics?.counter('stream_requests_refused_total', 'Requests answered with an error, by code');
    options.metrics?.gauge('stream_end_offset', 'Offset the next durable record will get').set(() => log.endOffset);
    options.metrics?.gauge('stream_start_offset', 'Offset of the oldest retained record').set(() => log.startOffset);
    options.metrics?.gauge('stream_bytes', 'Bytes in retained segments').set(() => log.sizeBytes);

    const server = createServer((socket) => {
      socket.setNoDelay(true);
      // A stranger may not make us buffer more than a hello's worth before it proves a token.
      const decoder = new FrameDecoder(MAX_HELLO_FRAME_BYTES);
      const cancels = new Set<() => void>();
      let authenticated = false;
      const helloTimer = setTimeout(() => socket.destroy(), HELLO_TIMEOUT_MS);
      const send = (message: Response) => {
        if (!socket.destroyed) socket.write(encodeFrame(message));
      };
      const fail = (id: number, code: string, message: string) => {
        refused?.inc(1, { code });
        send({ t: 'error', id, code, message });
      };

      const fetch = (req: Extract<Request, { t: 'fetch' }>) => {
        const respond = () => {
          log.read(req.offset, req.max, req.maxBytes).then(
            (result) => {
              fetched?.inc(result.records.length);
              send({ t: 'records', id: req.id, offset: result.offset, records: result.records, start: log.startOffset, end: log.endOffset });
            },
            (e: Error) => fail(req.id, 'read_failed', e.message),
          );
        };
        const waitMs = Math.min(req.waitMs ?? 0, maxWaitMs);
        const ready = () => log.endOffset - Math.max(req.offset, log.startOffset) >= req.max;
        if (waitMs === 0 || ready()) return respond();
        // Long poll: answer as soon as `max` records exist, or with whatever exists when the wait ends.
        const done = () => {
          cancels.delete(done);
          unsubscribe();
          clearTimeout(timer);
        };
        const unsubscribe = log.onDurable(() => {
          if (!ready()) return;
          done();
          respond();
        });
        const timer = setTimeout(() => {
          done();
          respond();
        }, waitMs);
        cancels.add(done);
      };

      const handle = (req: Request) => {
        switch (req.t) {
          case 'hello':
            authenticated = digests.some((d) => timingSafeEqual(d, digest(req.token)));
            if (authenticated) {
              clearTimeout(helloTimer);
              return send({ t: 'welcome', id: req.id });
            }
            fail(req.id, 'unauthorized', 'bad token');
            return socket.end();
          case 'produce':
            return void log.append(req.records).then(
              (offset) => {
                appended?.inc(req.records.length);
                send({ t: 'ack', id: req.id, offset, count: req.records.length });
              },
              (e: Error) => fail(req.id, e instanceof RangeError ? 'bad_request' : 'append_failed', e.message),
            );
          case 'fetch':
            return fetch(req);
          case 'commit':
            if (!CONSUMER_NAME.test(req.consumer)) return fail(req.id, 'bad_request', 'consumer must match ' + CONSUMER_NAME.source);
            return void offsets.commit(req.consumer, req.offset).then(
              () => send({ t: 'committed', id: req.id, offset: req.offset }),
              (e: Error) => fail(req.id, 'commit_failed', e.message),
            );
          case 'committed':
            return send({ t: 'committed', id: req.id, offset: offsets.get(req.consumer) });
        }
      };

      socket.on('data', (chunk: Buffer) => {
        decoder.push(chunk);
        // One frame at a time: the hello raises the frame limit for the frames after it, not for those before.
        while (!socket.destroyed && !socket.writableEnded) {
          let message: unknown;
          try {
            const frame = decoder.next();
            if (frame === null) return;
            message = decodeFrame(frame);
          } catch (e) {
            fail(0, 'bad_frame', (e as Error).message);
            return void socket.destroy();
          }
          const req = parseRequest(message);
          if (typeof req === 'string') {
            const id = (message as { id?: unknown })?.id;
            fail(Number.isSafeInteger(id) ? (id as number) : 0, 'bad_request', req);
            continue;
          }
          if (!authenticated && req.t !== 'hello') {
            fail(req.id, 'unauthorized', 'send hello with a token first');
            return void socket.end();
          }
          handle(req);
          if (authenticated) decoder.maxFrameBytes = MAX_FRAME_BYTES;
        }
      });
      socket.on('error', (e) => options.logger?.log('debug', 'stream client socket error', { error: e.message }));
      socket.on('close', () => {
        clearTimeout(helloTimer);
        for (const cancel of [...cancels]) cancel();
      });
    });
    // At its share of the process's descriptors it refuses new connections.
    limitServer(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
    const stream = new StreamServer(server, (server.address() as { port: number }).port);
    server.on('connection', (s: Socket) => {
      stream.sockets.add(s);
      s.on('close', () => stream.sockets.delete(s));
    });
    return stream;
  }

  /** Stops accepting, cuts every client off and waits for the listener to close. */
  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
