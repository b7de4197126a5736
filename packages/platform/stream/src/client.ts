/** A consumer's client: fetch records from an offset and keep consumer offsets on the server. */
import { RpcClient } from '@raftkit/rpc';
import { MAX_FRAME_BYTES, type Answers, type Request } from './protocol.js';

export interface StreamClientOptions {
  address: string;
  token: string;
  /** Answer deadline for requests other than a fetch's own wait (default 5 s). */
  timeoutMs?: number;
}

export interface FetchResult {
  /** Offset of records[0]: the asked one, or the oldest retained record when the asked one was deleted. */
  offset: number;
  records: Uint8Array[];
  /** The stream's oldest retained offset and durable end when the server answered. */
  start: number;
  end: number;
}

/** Connects on first use and again after a failure; every method rejects with an RpcError when it cannot answer. */
export class StreamClient {
  private readonly rpc: RpcClient;
  private readonly timeoutMs: number;

  constructor(options: StreamClientOptions) {
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.rpc = new RpcClient({
      address: options.address,
      token: options.token,
      timeoutMs: this.timeoutMs,
      maxFrameBytes: MAX_FRAME_BYTES,
      reconnectDelayMs: 0,
    });
  }

  /** Up to `max` records from `offset`, waiting up to `waitMs` for `max` to exist (then answering with what does). */
  async fetch(offset: number, max: number, options: { waitMs?: number; maxBytes?: number } = {}): Promise<FetchResult> {
    const waitMs = options.waitMs ?? 0;
    const request: Request = {
      t: 'fetch',
      offset,
      max,
      waitMs,
      ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
    };
    return (await this.rpc.call(request, { timeoutMs: waitMs + this.timeoutMs })) as Answers['fetch'];
  }

  async commit(consumer: string, offset: number): Promise<void> {
    await this.rpc.call({ t: 'commit', consumer, offset } satisfies Request);
  }

  async committed(consumer: string): Promise<number | null> {
    return ((await this.rpc.call({ t: 'committed', consumer } satisfies Request)) as Answers['committed']).offset;
  }

  close(): void {
    this.rpc.close();
  }
}
