/**
 * Appends over the binary RPC transport (@raftkit/rpc) beside the HTTP route. An append over HTTP is one request
 * parsed, routed and answered on its own; over one RPC connection the appends a client makes in one turn arrive in
 * one frame, join one Raft entry of the partition (AppendBatcher) and are answered in one frame, so the leader pays
 * its socket writes and parsing per turn, not per append. The listener needs no port of its own in the cluster's
 * configuration: `GET /v1/rpc` starts it on the address the caller reached this member's HTTP listener at (a free
 * port beside it) and names it. Clusters served over TLS keep appends on HTTPS (this transport is plain TCP).
 */
import type { Socket } from 'node:net';
import {
  badRequest,
  notFound,
  requireInteger,
  requireObject,
  requireString,
  type Principal,
  type ServiceContext,
} from '@raftkit/http';
import { serveRpc, type RpcServer } from '@raftkit/rpc';
import { TOPIC_NAME } from '../topics.js';

/** Where a client asks for the binary listener's address. */
export const APPEND_RPC_PATH = '/v1/rpc';
/** A frame carries many calls; a lone append's body is at most 1 MiB, so a frame of 8 MiB holds any one of them. */
export const APPEND_RPC_MAX_FRAME_BYTES = 8 * 1024 * 1024;

/** An append's answer, the same on both routes. */
export interface AppendAnswer {
  partition: number;
  base_offset: number;
  count: number;
  duplicate: boolean;
}

/** One call of the binary route: `{topic, partition, records, producer?, seq?}`, the records as the HTTP body has them. */
export interface AppendCall {
  topic: string;
  partition: number;
  /** The rest is checked as the HTTP route checks its JSON body. */
  body: Record<string, unknown>;
}

/** Appends one checked call for `principal` (access, partition and leadership are the callee's to check). */
export type RpcAppend = (principal: Principal, call: AppendCall) => Promise<AppendAnswer>;

/** What `GET /v1/rpc` answers. */
export interface AppendRpcInfo {
  address: string;
  max_frame_bytes: number;
}

export function parseAppendCall(raw: unknown): AppendCall {
  const body = requireObject(raw);
  const topic = requireString(body, 'topic', { pattern: TOPIC_NAME });
  const partition = requireInteger(body, 'partition', { min: 0, max: 999_999_999 });
  return { topic, partition, body };
}

/** Registers `GET /v1/rpc`, which starts (once per local address) and names the binary listener of `append`. */
export function serveAppendRpc(service: ServiceContext, append: RpcAppend): void {
  const servers = new Map<string, Promise<RpcServer>>();
  // The transport registers its metrics once per registry: the first listener reports them.
  let metricsTaken = false;
  let stopped = false;
  service.onStop(() => {
    stopped = true;
    for (const server of servers.values()) server.then((s) => s.close()).catch(() => undefined);
  });
  service.router.get(APPEND_RPC_PATH, { admits: 'authenticated' }, async (ctx): Promise<AppendRpcInfo> => {
    const socket = ctx.req.socket as Socket & { encrypted?: boolean };
    if (socket.encrypted === true || stopped)
      throw notFound('appends go over HTTPS on this cluster: the binary transport is plain TCP');
    const local = (socket.localAddress ?? '').replace(/^::ffff:/, '');
    if (local === '') throw badRequest('invalid_request', 'the connection has no local address');
    const host = local.includes(':') ? `[${local}]` : local;
    let server = servers.get(host);
    if (server === undefined) {
      server = serveRpc<AppendCall, AppendAnswer>({
        address: `${host}:0`,
        tokens: service.router.tokens,
        admits: 'authenticated',
        parse: parseAppendCall,
        handler: (call, { principal }) => append(principal, call),
        name: 'log',
        maxFrameBytes: APPEND_RPC_MAX_FRAME_BYTES,
        // The HTTP route's limits stay in force: MAX_PENDING_APPENDS answers 429 per partition beyond.
        maxInFlight: 10_000,
        ...(metricsTaken ? {} : { metrics: service.metrics }),
        logger: service.logger,
      });
      metricsTaken = true;
      servers.set(host, server);
      server.catch(() => servers.delete(host));
    }
    const { port } = await server;
    return { address: `${host}:${port}`, max_frame_bytes: APPEND_RPC_MAX_FRAME_BYTES };
  });
}
