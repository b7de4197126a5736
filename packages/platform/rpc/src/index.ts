/**
 * @raftkit/rpc: the framed RPC transport of every binary protocol (the rate limiter's counter store and check
 * protocol, and what the groups layer and the new services add). See README.md for the protocol.
 */
export { RpcError, RPC_ERROR_STATUS, toRpcError } from './errors.js';
export type { RpcErrorBody } from './errors.js';
export { serveRpc } from './server.js';
export type { RpcContext, RpcHandler, RpcServer, RpcServerOptions } from './server.js';
export { RpcClient, RpcConnection } from './client.js';
export type { CallOptions, RpcClientOptions, RpcConnectionOptions, Welcome } from './client.js';
export { DEFAULT_MAX_FRAME_BYTES, MAX_CALLS_PER_FRAME, MAX_HELLO_FRAME_BYTES } from './codec.js';
