export { check, checkEvents } from './checker.js';
export type { CheckOptions, CheckResult, PartitionResult, Verdict } from './checker.js';
export { eventsToOperations, isPending, validateOperations, HistoryError } from './history.js';
export type { HistoryEvent, Operation } from './history.js';
export type { Model, StepResult } from './model.js';
export { fromNondeterministic } from './nondeterministic.js';
export type { NondeterministicModel } from './nondeterministic.js';
export { partitionByKey } from './partition.js';
export { describeResult } from './describe.js';
export { registerModel, registerValueKey } from './models/register.js';
export type { RegisterInput, RegisterOutput, RegisterValue } from './models/register.js';
export { casRegisterModel } from './models/cas-register.js';
export type { CasRegisterInput, CasRegisterOutput } from './models/cas-register.js';
export { kvModel } from './models/kv.js';
export type { KvInput, KvOutput, KvState } from './models/kv.js';
export { counterModel } from './models/counter.js';
export type { CounterInput, CounterOutput } from './models/counter.js';
export { parseJepsenEtcdLog } from './parsers/jepsen-etcd.js';
export type { EtcdInput, EtcdOutput, EtcdValue } from './parsers/jepsen-etcd.js';
export { parsePorcupineKvLog } from './parsers/porcupine-kv.js';
export { ParseError } from './parsers/parse-error.js';
export { keyedModel } from './models/keyed.js';
export type { KeyedState } from './models/keyed.js';
export { lockModel, singleLockModel } from './models/lock.js';
export type { LockInput, LockOutput, LockState, LockModelOptions } from './models/lock.js';
export {
  adaptEvents,
  casRegisterAdapter,
  counterAdapter,
  kvAdapter,
  lockAdapter,
  prepareHistory,
  registerAdapter,
  toRegisterValue,
  MODEL_NAMES,
} from './adapters/generic.js';
export type { GenericEvent, GenericType, HistoryAdapter, ModelName, PreparedHistory } from './adapters/generic.js';
export { parseJepsenEdnHistory } from './parsers/jepsen-edn.js';
export { parseEdnMap } from './parsers/edn.js';
export type { EdnValue, EdnKeyword } from './parsers/edn.js';
export { parseJepsenUtilLog } from './parsers/jepsen-util-log.js';
