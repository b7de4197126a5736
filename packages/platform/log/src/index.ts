export {
  PartitionMachine,
  checkPartitionCommand,
  recordSize,
  DEFAULT_RETENTION,
  MAX_RECORDS_PER_APPEND,
  MAX_VALUE_BYTES,
  MAX_RETENTION_BYTES,
  PRODUCER_WINDOW,
} from './machine.js';
export type { PartitionCommand, PartitionResult, Retention, FetchResult, AppendInput } from './machine.js';
export type { LogRecord as StoredRecord } from './machine.js';
export {
  createLogService,
  type LogServiceOptions,
  MAX_PENDING_APPENDS,
  MAX_PENDING_BYTES,
  MAX_WAIT_MS,
} from './members/api.js';
export {
  partitionGroup,
  parsePartitionGroup,
  partitionOf,
  topicsOf,
  TOPIC_ACCESS,
  TOPIC_NAME,
  MAX_PARTITIONS,
} from './topics.js';
export type { TopicAccess, TopicInfo, PartitionData } from './topics.js';
export { LogClient, LogProducer, LogConsumer, LogError } from './client.js';
export { GroupConsumer, DEFAULT_HEARTBEAT_MS } from './group-consumer.js';
export type { GroupConsumerOptions, PartitionClaim } from './group-consumer.js';
export {
  GroupTable,
  assignSlots,
  DEFAULT_MEMBER_TTL_MS,
  MAX_GROUP_MEMBERS,
  MAX_COORDINATED_GROUPS,
  MAX_GROUP_SLOTS,
} from './membership.js';
export type { CoordinatedGroup, ExpireResult, GroupView, JoinResult, LeaveResult } from './membership.js';
export { CoordinatorLeases } from './lease-keeper.js';
export type {
  LogClientOptions,
  TopicSettings,
  TopicDescription,
  LogRecord,
  FetchAnswer,
  AppendAnswer,
  ConsumedRecord,
  GroupJoin,
  LogConsumerOptions,
} from './client.js';
export {
  CheckedConsumer,
  DeadLetterQueue,
  decodeOrDeadLetter,
  DEAD_LETTER_VALUE_CHARS,
  DEAD_LETTER_REASON_CHARS,
} from './dead-letter.js';
export type { DeadLetter, Decoded, RecordDecoder } from './dead-letter.js';
