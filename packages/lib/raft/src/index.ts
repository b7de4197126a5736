/**
 * @raftkit/raft: an embeddable Raft library. A pure deterministic core (RaftCore), a driver (RaftNode) that runs
 * it against Storage, Transport and StateMachine, LevelDB and in-memory storage, TCP and in-process transports,
 * and exactly-once client sessions.
 */
export * from './types.js';
export { RaftCore, ConfigChangeError, applyChange } from './core.js';
export type { CoreOptions, CoreState, CoreStatus, PeerStatus, ProposeOutcome } from './core.js';
export {
  RaftNode,
  TimeoutError,
  SessionError,
  StoppedError,
  CommandTooLargeError,
  ApplyError,
  sessionFailure,
} from './node.js';
export type { RaftNodeOptions, NodeStatus, NodeObserver, CallOptions } from './node.js';
export { silentLogger } from './logger.js';
export type { Logger, LogLevel } from './logger.js';
export { PacedTicker, type Ticker, type PacedTickerOptions } from './ticker.js';
export { ReadyTurn } from './turn.js';
export { GroupHost } from './groups/host.js';
export type { GroupHostOptions, GroupOptions } from './groups/host.js';
export { ManagedHost } from './groups/managed.js';
export type { ManagedHostOptions, ManagedGroupOptions } from './groups/managed.js';
export { MetaMachine, META_GROUP, placeReplicas, checkMetaCommand } from './groups/meta.js';
export type { MetaCommand, MetaResult, GroupRecord, HostRecord } from './groups/meta.js';
export { GroupCommitLevel } from './groups/group-commit.js';
export type { GroupCommitStats } from './groups/group-commit.js';
export { SessionStateMachine, encodeRequest, decodeRequest } from './sessions.js';
export type { SessionRequest, SessionResult, SessionOptions } from './sessions.js';
export { InvariantError } from './assert.js';
export { Prng } from './prng.js';
export { MemoryStorage } from './storage/memory.js';
export { LevelStorage } from './storage/leveldb.js';
export type {
  LevelStorageOptions,
  LevelStorageLocation,
  SharedLevel,
  BatchOp,
  RangeOptions,
  ViewEncodings,
} from './storage/leveldb.js';
export { TcpTransport } from './transport/tcp.js';
export type {
  TcpTransportOptions,
  TransportSecret,
  TransportTls,
  HostPort,
  TransportStats,
  PeerWireStats,
} from './transport/tcp.js';
export { LocalNetwork } from './transport/local.js';
export { FrameReader, FrameTooLargeError, lengthPrefixed } from './transport/frame-reader.js';
export { Counter, Gauge, Histogram, MetricsRegistry } from './metrics.js';
export type { CounterSeries, Labels, Metric } from './metrics.js';
export { RaftMetrics, combineObservers } from './node-metrics.js';
export type { MetricsSource } from './node-metrics.js';
