/**
 * Appends and fetches over the binary RPC transport (@raftkit/rpc) beside the HTTP routes. An append over HTTP is
 * one request parsed, routed and answered on its own; over one RPC connection the appends a client makes in one
 * turn arrive in one frame, join one Raft entry of the partition (AppendBatcher) and are answered in one frame, so
 * the leader pays its socket writes and parsing per turn, not per append. A fetch's page leaves as one msgpack frame
 * instead of a JSON body (which costs a stringify on the member and a body copy and parse in the client). The
 * listener needs no port of its own in the cluster's configuration: `GET /v1/rpc` starts it on the address the
 * caller reached this member's HTTP listener at (a free port beside it) and names it. Clusters served over TLS keep
 * both on HTTPS (this transport is plain TCP).
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
import type { LogRecord } from '../machine.js';
import { TOPIC_NAME } from '../topics.js';

/** Where a client asks for the binary listener's address. */
export const LOG_RPC_PATH = '/v1/rpc';
/** Records a fetch answers at most, on either route. */
export const MAX_FETCH_RECORDS = 10_000;
/** Record bytes a fetch answers at most, on either route. */
export const MAX_FETCH_BYTES = 8 * 1024 * 1024;
/**
 * A frame carries many calls or answers; the largest single one is a fetch's page of MAX_FETCH_BYTES plus its
 * encoding, so a frame of twice that holds any one of them (answers that do not fit together leave in several).
 */
export const LOG_RPC_MAX_FRAME_BYTES = 2 * MAX_FETCH_BYTES;
/** A client reading two full pages behind is still reading; one further behind is cut off. */
const MAX_QUEUED_OUTPUT_BYTES = 4 * LOG_RPC_MAX_FRAME_BYTES;

/** An append's answer, the same on both routes. */
export interface AppendAnswer {
  partition: number;
  base_offset: number;
  count: number;
  duplicate: boolean;
}

/** A fetch's answer, the same on both routes. */
export interface FetchAnswer {
  partition: number;
  records: LogRecord[];
  next_offset: number;
  start_offset: number;
  end_offset: number;
}

/** What a fetch asks for, checked (the HTTP route's query parameters, the binary route's call fields). */
export interface FetchRequest {
  offset: number;
  maxRecords: number;
  maxBytes: number;
  waitMs: number;
  linearizable: boolean;
}

/**
 * One call of the binary route. An append is `{topic, partition, records, producer?, seq?}` (the records as the
 * HTTP body has them; the rest is checked as that body is); a fetch is `{op: 'fetch', topic, partition, offset,
 * max_records?, max_bytes?, wait_ms?, consistency?}`, the fields of the HTTP route's query.
 */
export type LogRpcCall =
  | { op: 'append'; topic: string; partition: number; body: Record<string, unknown> }
  | { op: 'fetch'; topic: string; partition: number; request: FetchRequest };

/** What the binary route runs for `principal` (access, partition and leadership are the callee's to check). */
export interface LogRpcHandlers {
  append(principal: Principal, call: Extract<LogRpcCall, { op: 'append' }>): Promise<AppendAnswer>;
  fetch(principal: Principal, call: Extract<LogRpcCall, { op: 'fetch' }>, signal: AbortSignal): Promise<FetchAnswer>;
}

/** What `GET /v1/rpc` answers. */
export interface LogRpcInfo {
  address: string;
  max_frame_bytes: number;
}

/** The limits a fetch is held to, on either route (`wait_ms` up to `maxWaitMs`). */
export function fetchRequestOf(
  field: (name: string, fallback: number, min: number, max: number) => number,
  consistency: unknown,
  maxWaitMs: number,
): FetchRequest {
  if (consistency !== undefined && consistency !== 'linearizable' && consistency !== 'local')
    throw badRequest('invalid_consistency', 'consistency is linearizable or local', { field: 'consistency' });
  return {
    offset: field('offset', 0, 0, Number.MAX_SAFE_INTEGER),
    maxRecords: field('max_records', 1000, 1, MAX_FETCH_RECORDS),
    maxBytes: field('max_bytes', 1024 * 1024, 1, MAX_FETCH_BYTES),
    waitMs: field('wait_ms', 0, 0, maxWaitMs),
    linearizable: consistency === 'linearizable',
  };
}

export function parseLogRpcCall(raw: unknown, maxWaitMs: number): LogRpcCall {
  const body = requireObject(raw);
  const topic = requireString(body, 'topic', { pattern: TOPIC_NAME });
  const partition = requireInteger(body, 'partition', { min: 0, max: 999_999_999 });
  if (body.op === undefined || body.op === 'append') return { op: 'append', topic, partition, body };
  if (body.op !== 'fetch') throw badRequest('invalid_request', 'op is append or fetch', { field: 'op' });
  const field = (name: string, fallback: number, min: number, max: number): number =>
    body[name] === undefined ? fallback : requireInteger(body, name, { min, max });
  return { op: 'fetch', topic, partition, request: fetchRequestOf(field, body.consistency, maxWaitMs) };
}

/** Registers `GET /v1/rpc`, which starts (once per local address) and names the binary listener of `handlers`. */
export function serveLogRpc(service: ServiceContext, handlers: LogRpcHandlers, maxWaitMs: number): void {
  const servers = new Map<string, Promise<RpcServer>>();
  // The transport registers its metrics once per registry: the first listener reports them.
  let metricsTaken = false;
  let stopped = false;
  service.onStop(() => {
    stopped = true;
    for (const server of servers.values()) server.then((s) => s.close()).catch(() => undefined);
  });
  service.router.get(LOG_RPC_PATH, { admits: 'authenticated' }, async (ctx): Promise<LogRpcInfo> => {
    const socket = ctx.req.socket as Socket & { encrypted?: boolean };
    if (socket.encrypted === true || stopped)
      throw notFound('appends and fetches go over HTTPS on this cluster: the binary transport is plain TCP');
    const local = (socket.localAddress ?? '').replace(/^::ffff:/, '');
    if (local === '') throw badRequest('invalid_request', 'the connection has no local address');
    const host = local.includes(':') ? `[${local}]` : local;
    let server = servers.get(host);
    if (server === undefined) {
      server = serveRpc<LogRpcCall, AppendAnswer | FetchAnswer>({
        address: `${host}:0`,
        tokens: service.router.tokens,
        admits: 'authenticated',
        parse: (raw) => parseLogRpcCall(raw, maxWaitMs),
        handler: (call, { principal, signal }) =>
          call.op === 'append' ? handlers.append(principal, call) : handlers.fetch(principal, call, signal),
        name: 'log',
        maxFrameBytes: LOG_RPC_MAX_FRAME_BYTES,
        maxQueuedOutputBytes: MAX_QUEUED_OUTPUT_BYTES,
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
    return { address: `${host}:${port}`, max_frame_bytes: LOG_RPC_MAX_FRAME_BYTES };
  });
}
