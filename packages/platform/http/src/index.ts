export * from './errors.js';
export * from './validate.js';
export { parseJsonBody } from './json-body.js';
export {
  Router,
  Reply,
  sendJson,
  sendError,
  requirePrincipal,
  admit,
  ADMISSIONS,
  DEFAULT_MAX_BODY_BYTES,
} from './router.js';
export type {
  Admission,
  ExactHandler,
  ExactRouteOptions,
  Handler,
  PrincipalFor,
  RequestContext,
  RouteInfo,
  RouteOptions,
  RouterOptions,
} from './router.js';
export {
  authenticate,
  bearerToken,
  cookieValue,
  deriveClientToken,
  deriveServiceToken,
  isInternalCaller,
  servicePrincipal,
  SERVICE_NAME,
  tokenHash,
  verifyToken,
} from './auth.js';
export type { Principal } from './auth.js';
export { MetricsRegistry, Counter, Gauge, Histogram } from './metrics.js';
export { jsonLogger } from './log.js';
export { ownerOnlyFiles, OWNER_ONLY_UMASK } from './owner-only.js';
export type { Logger, LogLevel } from './log.js';
export {
  ServiceContext,
  combineServices,
  ServiceGroup,
  raftErrorToHttp,
  CLIENT_ID_HEADER,
  CLIENT_SEQ_HEADER,
  CLIENT_ACK_HEADER,
  GROUP_LEADER_HEADER,
} from './service.js';
export type { CommandRoute, ServiceDefinition, ServiceGroups } from './service.js';
export {
  BUSY_WRITERS,
  IDLE_MEMBERS,
  IDLE_MEMBER_HEARTBEAT_TICKS,
  PACED_WRITES,
  SINGLE_THREADED_GC,
  SPACED_MAJOR_GC,
} from './member-tuning.js';
export type { MemberTuning } from './member-tuning.js';
export { DEFAULT_REPLICAS, groupOptionsOf, oneGroupKind, REPLICA_CHOICES, replicasProblem } from './group-kinds.js';
export type { GroupKind, MemberRaftOptions, OneGroupKind, OnRequestKind } from './group-kinds.js';
export { ClusterClient, ServiceError, errorBody } from './client.js';
export type { ClusterAnswer, ClusterClientOptions, RequestOptions } from './client.js';
export { serveWorkerHttp } from './worker.js';
export { processHttp, hostPort } from './process-http.js';
export { watchGcPauses, GC_PAUSE_THRESHOLDS_MS } from './gc-pauses.js';
export type { GcPauseWatch } from './gc-pauses.js';
export type { ProcessHttp, ProcessHttpOptions, HealthBody } from './process-http.js';
export { clusterScheme, clusterTls, clusterUrl, connectOptions, readClusterTls, useClusterTls } from './tls.js';
export type { ClusterTls, ClusterTlsFiles } from './tls.js';
export type { PeerAddress, WorkerOptions, RunningWorker, WorkerRole, WorkerRoles, WorkerHttp } from './worker.js';
export { limitServer, fileLimit, connectionBudget, holdUpgraded, FALLBACK_FILE_LIMIT } from './connections.js';
export {
  HeldSockets,
  heldReserve,
  addressKey,
  type HeldRefusal,
  type HeldSocketOptions,
  type CapSource,
} from './held-sockets.js';
export type { LimitOptions, ConnectionLimit } from './connections.js';
export { fullCounter, idleExpiryFor, idleExpiryMs, refill, resetMs, take } from './bucket.js';
export type { BucketCounter, BucketLimits, TakeResult } from './bucket.js';
export {
  CommandShapeError,
  arrayField,
  batchCommandsField,
  booleanField,
  commandOf,
  integerField,
  nullableIntegerField,
  nullableStringField,
  numberField,
  objectField,
  stringArrayField,
  stringField,
} from './command-shape.js';
export type { CommandFields } from './command-shape.js';
export { checkedCommand } from './command-route.js';
export { GroupRouter, hashSlot, locateBySlot, HASH_SLOTS } from './group-router.js';
export { GroupClient } from './group-client.js';
export type { GroupRouterOptions, GroupRouterStats, GroupLocator, RouterGroup } from './group-router.js';
export { SlotGroups, slotRange } from './slot-groups.js';
export type { PlannedGroup } from './slot-groups.js';
export { TurnBatcher } from './turn-batcher.js';
export type { TurnBatcherOptions } from './turn-batcher.js';
export { DistinctNameBatcher } from './distinct-batcher.js';
export { pushOrDrop } from './slow-push.js';
export type { PushSocket } from './slow-push.js';
export { NextRoundCoalescer } from './next-round.js';
