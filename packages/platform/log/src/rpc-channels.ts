/**
 * LogClient's binary route for appends and fetches (the member side is members/rpc-route.ts): one RpcConnection per
 * member that leads a partition this client uses, found through that member's `GET /v1/rpc`. The appends of one
 * turn leave in one frame and come back in one, where HTTP costs a request and an answer each; a fetch's page comes
 * back as msgpack, not a JSON body. It is a fast path only: while a leader is unknown, its listener not yet found,
 * or its connection down, calls go over HTTP, and a call the binary route could not place (a follower's 421, a lost
 * connection, no leader) is sent again over HTTP, whose router follows leaders and retries as it always did.
 */
import { type GroupRouter, ServiceError } from '@raftkit/http';
import { RpcConnection, RpcError } from '@raftkit/rpc';
import type { LogRpcInfo } from './members/rpc-route.js';

/** How long a member whose listener could not be found or reached is left on HTTP before it is asked again. */
const RETRY_AFTER_FAILURE_MS = 5_000;
/** A member that has no binary route (an older version, a TLS cluster) is asked again this much later. */
const RETRY_AFTER_REFUSAL_MS = 60_000;
const WELCOME_TIMEOUT_MS = 3_000;

/** The binary route to one member: its connection once welcomed, else when to look again. */
interface Channel {
  connection: RpcConnection | null;
  opening: boolean;
  retryAt: number;
}

/**
 * Codes after which a call goes again over HTTP: the binary route could not place it (not the leader, no
 * connection, a full connection), or no leader answered (503), which the HTTP router waits out and retries.
 */
const FALLS_BACK = new Set(['misdirected', 'unavailable', 'closed', 'overloaded', 'frame_too_large', 'cancelled']);

export class RpcChannels {
  private readonly channels = new Map<string, Channel>();
  private closed = false;

  constructor(
    private readonly router: GroupRouter,
    private readonly token: string,
  ) {}

  /**
   * Sends `call` over the binary route to `group`'s leader, or answers null when the call is for HTTP: no binary
   * route to the leader yet, or one that could not place this call. Other errors are thrown as ServiceError, as the
   * HTTP route's answer would be. `timeoutMs` defaults to the router's.
   */
  async call<T>(group: string, call: Record<string, unknown>, timeoutMs = this.router.timeoutMs): Promise<T | null> {
    const connection = this.connectionFor(group);
    if (connection === null) return null;
    try {
      return await connection.call<T>(call, { timeoutMs });
    } catch (error) {
      if (!(error instanceof RpcError)) throw error;
      if (FALLS_BACK.has(error.code)) return null;
      // A call that got no answer in time may have been stored: its outcome is unknown, as an HTTP 503's.
      if (error.code === 'timeout') throw new ServiceError(503, 'unavailable', error.message, errorBody(error));
      throw new ServiceError(error.status, error.code, error.message, errorBody(error));
    }
  }

  close(): void {
    this.closed = true;
    for (const channel of this.channels.values()) channel.connection?.close();
    this.channels.clear();
  }

  /** The welcomed connection to `group`'s leader, or null (and, when due, a look for it in the background). */
  private connectionFor(group: string): RpcConnection | null {
    const url = this.router.leaderOf(group);
    if (url === null || !url.startsWith('http://')) return null;
    let channel = this.channels.get(url);
    if (channel === undefined) {
      channel = { connection: null, opening: false, retryAt: 0 };
      this.channels.set(url, channel);
    }
    if (channel.connection !== null) return channel.connection;
    if (!channel.opening && Date.now() >= channel.retryAt) void this.open(url, channel);
    return null;
  }

  private async open(url: string, channel: Channel): Promise<void> {
    channel.opening = true;
    let connection: RpcConnection | null = null;
    try {
      const response = await fetch(`${url}/v1/rpc`, {
        headers: { authorization: `Bearer ${this.token}` },
        signal: AbortSignal.timeout(WELCOME_TIMEOUT_MS),
      });
      if (!response.ok) {
        await response.body?.cancel();
        channel.retryAt = Date.now() + RETRY_AFTER_REFUSAL_MS;
        return;
      }
      const info = (await response.json()) as LogRpcInfo;
      if (this.closed) return;
      connection = new RpcConnection({
        address: info.address,
        token: this.token,
        timeoutMs: this.router.timeoutMs,
        maxFrameBytes: info.max_frame_bytes,
      });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        connection.welcomed,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('no welcome in time')), WELCOME_TIMEOUT_MS);
        }),
      ]).finally(() => clearTimeout(timer));
      if (this.closed) {
        connection.close();
        return;
      }
      const opened = connection;
      channel.connection = opened;
      opened.onClose(() => {
        if (channel.connection !== opened) return;
        channel.connection = null;
        channel.retryAt = Date.now() + 1_000;
      });
    } catch {
      connection?.close();
      channel.retryAt = Date.now() + RETRY_AFTER_FAILURE_MS;
    } finally {
      channel.opening = false;
    }
  }
}

function errorBody(error: RpcError): { error: { code: string; message: string } } {
  return { error: { code: error.code, message: error.message } };
}
