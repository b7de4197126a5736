/**
 * Histories in Jepsen's generic shape (one map per event: process, type, f,
 * value, optionally key, error and time), as jepsen-like records them and
 * as Jepsen's own history files hold them, turned into checker events for a
 * model. Pure: text in (see parsers), events out.
 */
import type { HistoryEvent } from '../history.js';
import type { Model } from '../model.js';
import { HistoryError } from '../history.js';
import { casRegisterModel, type CasRegisterInput, type CasRegisterOutput } from '../models/cas-register.js';
import { counterModel, type CounterInput, type CounterOutput } from '../models/counter.js';
import { keyedModel } from '../models/keyed.js';
import { kvModel, type KvInput, type KvOutput } from '../models/kv.js';
import { lockModel, type LockInput, type LockOutput, type LockModelOptions } from '../models/lock.js';
import { registerModel, type RegisterInput, type RegisterOutput, type RegisterValue } from '../models/register.js';

export type GenericType = 'invoke' | 'ok' | 'fail' | 'info';

/**
 * One event of a generic history. `process` is an integer for clients; any
 * other value (Jepsen's `:nemesis`) marks an event that is not a client
 * operation and is skipped by the adapters. `error` says why an operation
 * failed or is unknown.
 */
export interface GenericEvent {
  readonly process: number | string;
  readonly type: GenericType;
  readonly f: string;
  readonly key?: string;
  readonly value?: unknown;
  readonly error?: unknown;
  readonly time?: number;
}

/** How one model reads generic events. */
export interface HistoryAdapter<I, O> {
  /** The model's input for an invocation, or undefined when the event is not an operation of this model (it and its completion are skipped). */
  input(invoke: GenericEvent): I | undefined;
  /** The output observed by an `ok` completion. */
  output(input: I, ok: GenericEvent): O;
  /**
   * A `fail` completion that still observed something definite (a compare
   * that did not match, a release refused for a stale token): its output.
   * Undefined, or no function: the operation did not happen and is dropped.
   */
  failObservation?(input: I, fail: GenericEvent): O | undefined;
}

/**
 * Converts generic events into checker events with `adapter`. Events are
 * matched per process (one outstanding invocation each). Times are kept
 * when every client event has one, else the index is the time.
 */
export function adaptEvents<I, O>(
  events: readonly GenericEvent[],
  adapter: HistoryAdapter<I, O>,
): HistoryEvent<I, O>[] {
  const clients = events.filter((event) => typeof event.process === 'number');
  const timed = clients.every((event) => typeof event.time === 'number');
  const open = new Map<number, I | null>();
  const out: HistoryEvent<I, O>[] = [];
  clients.forEach((event, index) => {
    const clientId = event.process as number;
    const time = timed ? event.time! : index;
    if (event.type === 'invoke') {
      if (open.has(clientId))
        throw new HistoryError(
          `event ${index}: process ${clientId} invoked while its previous operation is outstanding`,
        );
      const input = adapter.input(event);
      open.set(clientId, input === undefined ? null : input);
      if (input !== undefined) out.push({ type: 'invoke', clientId, input, time });
      return;
    }
    if (!open.has(clientId))
      throw new HistoryError(`event ${index}: ${event.type} from process ${clientId} with no outstanding invocation`);
    const input = open.get(clientId)!;
    open.delete(clientId);
    if (input === null) return;
    if (event.type === 'ok') out.push({ type: 'ok', clientId, output: adapter.output(input, event), time });
    else if (event.type === 'info') out.push({ type: 'info', clientId, time });
    else {
      const observed = adapter.failObservation?.(input, event);
      out.push(
        observed === undefined ? { type: 'fail', clientId, time } : { type: 'ok', clientId, output: observed, time },
      );
    }
  });
  return out;
}

/** A register value from any JSON value: scalars as they are, anything else as its JSON text. */
export function toRegisterValue(value: unknown): RegisterValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  return JSON.stringify(value);
}

function casArguments(value: unknown): [RegisterValue, RegisterValue] {
  if (Array.isArray(value) && value.length === 2) return [toRegisterValue(value[0]), toRegisterValue(value[1])];
  if (typeof value === 'object' && value !== null && 'from' in value && 'to' in value) {
    const { from, to } = value as { from: unknown; to: unknown };
    return [toRegisterValue(from), toRegisterValue(to)];
  }
  throw new HistoryError(`a cas value must be [from, to], got ${JSON.stringify(value)}`);
}

type KeyedInput<I> = I & { readonly key: string };

/**
 * Register (f: read, write) and compare-and-set register (f: read, write,
 * cas with value [from, to]); with `key` on the events, one register per key.
 * A `fail`ed cas whose `error` is "cas_mismatch" (or every failed cas, with
 * `casFailIsObservation`, as in Porcupine's etcd tests) observed that the
 * value was not `from`; any other failed cas did not happen (Jepsen).
 */
export function casRegisterAdapter(
  options: { casFailIsObservation?: boolean } = {},
): HistoryAdapter<KeyedInput<CasRegisterInput<RegisterValue>>, CasRegisterOutput<RegisterValue>> {
  return {
    input(event) {
      const key = event.key ?? '';
      switch (event.f) {
        case 'read':
          return { op: 'read', key };
        case 'write':
          return { op: 'write', key, value: toRegisterValue(event.value) };
        case 'cas': {
          const [from, to] = casArguments(event.value);
          return { op: 'cas', key, from, to };
        }
        default:
          throw new HistoryError(
            `the cas-register model has no operation ${JSON.stringify(event.f)} (read, write, cas)`,
          );
      }
    },
    output(input, ok) {
      if (input.op === 'read') return { value: toRegisterValue(ok.value) };
      if (input.op === 'cas') return { ok: true };
      return {};
    },
    failObservation(input, fail) {
      if (input.op !== 'cas') return undefined;
      return options.casFailIsObservation || fail.error === 'cas_mismatch' ? { ok: false } : undefined;
    },
  };
}

export function registerAdapter(): HistoryAdapter<
  KeyedInput<RegisterInput<RegisterValue>>,
  RegisterOutput<RegisterValue>
> {
  return {
    input(event) {
      const key = event.key ?? '';
      if (event.f === 'read') return { op: 'read', key };
      if (event.f === 'write') return { op: 'write', key, value: toRegisterValue(event.value) };
      throw new HistoryError(`the register model has no operation ${JSON.stringify(event.f)} (read, write)`);
    },
    output: (input, ok) => (input.op === 'read' ? { value: toRegisterValue(ok.value) } : {}),
  };
}

/** Porcupine's key-value operations: get, put, append on `key` (a get's nil value reads as ""). */
export function kvAdapter(): HistoryAdapter<KvInput, KvOutput> {
  return {
    input(event) {
      if (typeof event.key !== 'string')
        throw new HistoryError(`kv operations need a string key: ${JSON.stringify(event)}`);
      const f = event.f === 'read' ? 'get' : event.f === 'write' ? 'put' : event.f;
      if (f !== 'get' && f !== 'put' && f !== 'append')
        throw new HistoryError(`the kv model has no operation ${JSON.stringify(event.f)} (get, put, append)`);
      if (f === 'get') return { op: 'get', key: event.key };
      return {
        op: f,
        key: event.key,
        value: event.value === null || event.value === undefined ? '' : String(event.value),
      };
    },
    output: (input, ok) =>
      input.op === 'get' ? { value: ok.value === null || ok.value === undefined ? '' : String(ok.value) } : {},
  };
}

/** A counter: add (value = delta) and read. */
export function counterAdapter(): HistoryAdapter<CounterInput, CounterOutput> {
  return {
    input(event) {
      if (event.f === 'read') return { op: 'read' };
      if (event.f === 'add' || event.f === 'increment') {
        const delta = event.f === 'increment' && event.value === undefined ? 1 : Number(event.value);
        if (!Number.isFinite(delta)) throw new HistoryError(`an add needs a numeric value: ${JSON.stringify(event)}`);
        return { op: 'add', delta };
      }
      throw new HistoryError(`the counter model has no operation ${JSON.stringify(event.f)} (add, read)`);
    },
    output: (input, ok) => (input.op === 'read' && typeof ok.value === 'number' ? { value: ok.value } : {}),
  };
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/**
 * Locks with fencing tokens (the lock name is `key`):
 * - acquire: invoke value `{session}`; ok value `{granted, token}`;
 * - release: invoke value `{session, token}`; ok means released; a `fail`
 *   with error "stale_token" or "not_holder" observed a refusal;
 * - read: ok value `{holder, token}`.
 * Any other f (such as writes to the protected resource) is skipped.
 */
export function lockAdapter(): HistoryAdapter<LockInput, LockOutput> {
  return {
    input(event) {
      if (typeof event.key !== 'string') return undefined;
      const lock = event.key;
      const session = field(event.value, 'session');
      switch (event.f) {
        case 'acquire':
          if (typeof session !== 'string')
            throw new HistoryError(`acquire needs value.session: ${JSON.stringify(event)}`);
          return { op: 'acquire', lock, session };
        case 'release': {
          const token = field(event.value, 'token');
          if (typeof session !== 'string' || typeof token !== 'number')
            throw new HistoryError(`release needs value.session and value.token: ${JSON.stringify(event)}`);
          return { op: 'release', lock, session, token };
        }
        case 'read':
          return { op: 'read', lock };
        default:
          return undefined;
      }
    },
    output(input, ok) {
      switch (input.op) {
        case 'acquire': {
          const granted = field(ok.value, 'granted');
          const token = field(ok.value, 'token');
          return {
            ...(typeof granted === 'boolean' ? { granted } : {}),
            ...(granted === true && typeof token === 'number' ? { token } : {}),
          };
        }
        case 'release':
          return { released: true };
        case 'read': {
          const holder = field(ok.value, 'holder');
          const token = field(ok.value, 'token');
          return {
            ...(holder === null || typeof holder === 'string' ? { holder } : {}),
            ...(typeof token === 'number' ? { token } : {}),
          };
        }
      }
    },
    failObservation(input, fail) {
      return input.op === 'release' && (fail.error === 'stale_token' || fail.error === 'not_holder')
        ? { released: false }
        : undefined;
    },
  };
}

export const MODEL_NAMES = ['register', 'cas-register', 'kv', 'counter', 'lock'] as const;
export type ModelName = (typeof MODEL_NAMES)[number];

export interface PreparedHistory {
  // The model's types are erased here: the events were made for it by its adapter.
  readonly model: Model<unknown, unknown, unknown>;
  readonly events: HistoryEvent<unknown, unknown>[];
}

/**
 * The model named `name` and the events of `history` adapted for it.
 * Register and cas-register become one register per key when the events
 * carry keys (initial value null: a missing key reads null).
 */
export function prepareHistory(
  name: ModelName,
  history: readonly GenericEvent[],
  options: { casFailIsObservation?: boolean; lock?: LockModelOptions } = {},
): PreparedHistory {
  const keyed = history.some((event) => typeof event.process === 'number' && typeof event.key === 'string');
  const erase = <S, I, O>(model: Model<S, I, O>, events: HistoryEvent<I, O>[]): PreparedHistory => ({
    model: model as unknown as Model<unknown, unknown, unknown>,
    events: events as unknown as HistoryEvent<unknown, unknown>[],
  });
  switch (name) {
    case 'register': {
      const inner = registerModel<RegisterValue>(null);
      const events = adaptEvents(history, registerAdapter());
      return keyed
        ? erase(
            keyedModel<RegisterValue, KeyedInput<RegisterInput<RegisterValue>>, RegisterOutput<RegisterValue>>(
              inner as unknown as Model<
                RegisterValue,
                KeyedInput<RegisterInput<RegisterValue>>,
                RegisterOutput<RegisterValue>
              >,
              (input) => input.key,
            ),
            events,
          )
        : erase(inner, events);
    }
    case 'cas-register': {
      const inner = casRegisterModel<RegisterValue>(null);
      const events = adaptEvents(history, casRegisterAdapter(options));
      return keyed
        ? erase(
            keyedModel<RegisterValue, KeyedInput<CasRegisterInput<RegisterValue>>, CasRegisterOutput<RegisterValue>>(
              inner as unknown as Model<
                RegisterValue,
                KeyedInput<RegisterInput<RegisterValue>>,
                RegisterOutput<RegisterValue>
              >,
              (input) => input.key,
            ),
            events,
          )
        : erase(inner, events);
    }
    case 'kv':
      return erase(kvModel, adaptEvents(history, kvAdapter()));
    case 'counter':
      return erase(counterModel, adaptEvents(history, counterAdapter()));
    case 'lock':
      return erase(lockModel(options.lock), adaptEvents(history, lockAdapter()));
  }
}
