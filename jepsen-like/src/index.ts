export { runTest, type RunOptions, type RunResult } from './runner.js';
export { checkLinearizability, findWindow, overall } from './check.js';
export * from './history.js';
export * from './nemesis/faults.js';
export { makeSchedule, type ScheduledAction, type ScheduleOptions } from './nemesis/schedule.js';
export { makeGrudge, complete, link, type Grudge, type Link } from './nemesis/grudge.js';
export { LinkProxy, NO_RULE, type PacketRule } from './net/proxy.js';
export { dropRules, nftScript, netemArgs } from './net/namespaces.js';
export { renderReport, faultsFromHistory } from './report/html.js';
export { Rng } from './rng.js';
export { WORKLOADS, makeWorkload } from './workloads/index.js';
export type {
  Workload,
  Worker,
  WorkerContext,
  CheckResult,
  Anomaly,
  Invocation,
  Completion,
} from './workloads/workload.js';
export { FencedStorage, checkLockHistory } from './workloads/lock.js';
export {
  checkLogHistory,
  checkAckedPresent,
  checkLogIntegrity,
  checkConsumerGroups,
  pairOps,
} from './workloads/log-checks.js';
export { commitRegisterEvents } from './workloads/log.js';
export {
  checkAuctionHistory,
  type LoggedBid,
  type FinalAuction,
  type VisibleChange,
} from './workloads/auction-checks.js';
export { checkFlashHistory, DEFAULT_FLASH_CHECK_OPTIONS, type FlashCheckOptions } from './workloads/flash-checks.js';
