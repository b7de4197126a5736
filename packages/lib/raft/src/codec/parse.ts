/**
 * Validators that turn decoded, untrusted plain data (from disk or the network) into the typed vocabulary of
 * `types.ts`. Each builds a fresh object holding only the known fields, so nothing unexpected (extra keys,
 * prototype tricks, aliased receive buffers) travels further into the core. Binary fields become owned
 * `Uint8Array`s. Anything malformed throws {@link DecodeError}.
 */
import type {
  AdminRequest,
  ConfigChange,
  Configuration,
  Entry,
  ForwardedResult,
  HardState,
  Message,
  MessageType,
  NodeId,
  Snapshot,
  SnapshotMeta,
} from '../types.js';
import { ownedBytes } from './msgpack.js';

/** Raised when decoded data does not have the expected shape. */
export class DecodeError extends Error {
  override name = 'DecodeError';
}

type Fields = Record<string, unknown>;

/** Asserts `value` is a plain object (not null, not an array, not a byte array). */
export function fieldsOf(value: unknown, what: string): Fields {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Uint8Array) {
    throw new DecodeError(`${what}: expected an object`);
  }
  return value as Fields;
}

/** A safe integer >= `min` (indexes, terms, counters). */
export function intField(fields: Fields, key: string, min = 0): number {
  const value = fields[key];
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new DecodeError(`${key}: expected an integer >= ${min}`);
  }
  return value;
}

function finiteField(fields: Fields, key: string): number {
  const value = fields[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new DecodeError(`${key}: expected a number`);
  return value;
}

/** A string field (possibly empty). */
export function stringField(fields: Fields, key: string): string {
  const value = fields[key];
  if (typeof value !== 'string') throw new DecodeError(`${key}: expected a string`);
  return value;
}

/** A non-empty string: a NodeId. */
export function nodeIdField(fields: Fields, key: string): NodeId {
  const value = stringField(fields, key);
  if (value.length === 0) throw new DecodeError(`${key}: expected a non-empty node id`);
  return value;
}

function booleanField(fields: Fields, key: string): boolean {
  const value = fields[key];
  if (typeof value !== 'boolean') throw new DecodeError(`${key}: expected a boolean`);
  return value;
}

/** Binary data. With `copy` (the default) the result is an owned Uint8Array; without it, it may alias input. */
export function bytesField(fields: Fields, key: string, copy = true): Uint8Array {
  const value = fields[key];
  if (!(value instanceof Uint8Array)) throw new DecodeError(`${key}: expected binary data`);
  return copy ? ownedBytes(value) : value;
}

function nodeIdList(value: unknown, what: string): NodeId[] {
  if (!Array.isArray(value)) throw new DecodeError(`${what}: expected an array`);
  return value.map((item, i) => {
    if (typeof item !== 'string' || item.length === 0) throw new DecodeError(`${what}[${i}]: expected a node id`);
    return item;
  });
}

function parseConfiguration(value: unknown): Configuration {
  const fields = fieldsOf(value, 'config');
  const config: Configuration = {
    voters: nodeIdList(fields.voters, 'voters'),
    learners: nodeIdList(fields.learners, 'learners'),
  };
  if (fields.addresses !== undefined && fields.addresses !== null) config.addresses = addressBook(fields.addresses);
  return config;
}

function addressBook(value: unknown): Record<NodeId, string> {
  const fields = fieldsOf(value, 'config.addresses');
  const book: Record<NodeId, string> = {};
  for (const [id, address] of Object.entries(fields)) {
    if (id.length === 0 || typeof address !== 'string')
      throw new DecodeError('config.addresses: expected node id -> "host:port"');
    book[id] = address;
  }
  return book;
}

function parseConfigChange(value: unknown): ConfigChange {
  const fields = fieldsOf(value, 'change');
  const node = nodeIdField(fields, 'node');
  const type = fields.type;
  switch (type) {
    case 'addLearner':
    case 'addVoter': {
      const address = fields.address;
      if (address === undefined || address === null) return { type, node };
      if (typeof address !== 'string') throw new DecodeError('change.address: expected "host:port"');
      return { type, node, address };
    }
    case 'promote':
    case 'remove':
    case 'forceNewCluster':
      return { type, node };
    default:
      throw new DecodeError(`change.type: unknown ${String(type)}`);
  }
}

export function parseEntry(value: unknown): Entry {
  const fields = fieldsOf(value, 'entry');
  const index = intField(fields, 'index', 1);
  const term = intField(fields, 'term');
  const time = finiteField(fields, 'time');
  switch (fields.kind) {
    case 'command':
      return { index, term, time, kind: 'command', data: bytesField(fields, 'data') };
    case 'config':
      return {
        index,
        term,
        time,
        kind: 'config',
        change: parseConfigChange(fields.change),
        config: parseConfiguration(fields.config),
      };
    case 'noop':
      return { index, term, time, kind: 'noop' };
    default:
      throw new DecodeError(`entry.kind: unknown ${String(fields.kind)}`);
  }
}

function parseEntries(value: unknown): Entry[] {
  if (!Array.isArray(value)) throw new DecodeError('entries: expected an array');
  return value.map(parseEntry);
}

export function parseHardState(value: unknown): HardState {
  const fields = fieldsOf(value, 'hardState');
  const vote = fields.vote;
  if (vote !== null && (typeof vote !== 'string' || vote.length === 0)) {
    throw new DecodeError('vote: expected a node id or null');
  }
  return { term: intField(fields, 'term'), vote, commit: intField(fields, 'commit') };
}

export function parseSnapshotMeta(value: unknown): SnapshotMeta {
  const fields = fieldsOf(value, 'snapshot meta');
  return {
    index: intField(fields, 'index'),
    term: intField(fields, 'term'),
    time: finiteField(fields, 'time'),
    config: parseConfiguration(fields.config),
  };
}

function parseSnapshot(value: unknown): Snapshot {
  const fields = fieldsOf(value, 'snapshot');
  return { meta: parseSnapshotMeta(fields.meta), data: bytesField(fields, 'data') };
}

function byteArrayList(value: unknown, what: string): Uint8Array[] {
  if (!Array.isArray(value)) throw new DecodeError(`${what}: expected an array`);
  return value.map((item, i) => {
    if (!(item instanceof Uint8Array)) throw new DecodeError(`${what}[${i}]: expected binary data`);
    return ownedBytes(item);
  });
}

/**
 * Every message type parseMessage knows. Typed as a full Record so that adding a type to `Message` fails to
 * compile here until parseMessage learns it too.
 */
const KNOWN_MESSAGE_TYPES: Record<MessageType, true> = {
  vote: true,
  prevote: true,
  voteResp: true,
  prevoteResp: true,
  append: true,
  appendResp: true,
  heartbeat: true,
  heartbeatResp: true,
  snapshot: true,
  timeoutNow: true,
  propose: true,
  results: true,
  readIndex: true,
  readIndexResp: true,
  admin: true,
};

/** Whether `type` names a Message type. */
function isMessageType(type: unknown): type is MessageType {
  return typeof type === 'string' && Object.hasOwn(KNOWN_MESSAGE_TYPES, type);
}

/** Validates a whole Message (including, for 'snapshot', its data). */
export function parseMessage(value: unknown): Message {
  const fields = fieldsOf(value, 'message');
  const from = nodeIdField(fields, 'from');
  const to = nodeIdField(fields, 'to');
  const term = intField(fields, 'term');
  const type = fields.type;
  if (!isMessageType(type)) throw new DecodeError(`message.type: unknown ${String(type)}`);
  switch (type) {
    case 'vote':
    case 'prevote':
      return {
        type,
        from,
        to,
        term,
        lastIndex: intField(fields, 'lastIndex'),
        lastTerm: intField(fields, 'lastTerm'),
        transfer: booleanField(fields, 'transfer'),
      };
    case 'voteResp':
    case 'prevoteResp':
      return { type, from, to, term, reject: booleanField(fields, 'reject') };
    case 'append':
      return {
        type,
        from,
        to,
        term,
        prevIndex: intField(fields, 'prevIndex'),
        prevTerm: intField(fields, 'prevTerm'),
        entries: parseEntries(fields.entries),
        commit: intField(fields, 'commit'),
      };
    case 'appendResp':
      return {
        type,
        from,
        to,
        term,
        index: intField(fields, 'index'),
        reject: booleanField(fields, 'reject'),
        hintIndex: intField(fields, 'hintIndex'),
        hintTerm: intField(fields, 'hintTerm'),
      };
    case 'heartbeat': {
      const heartbeat = { type, from, to, term, commit: intField(fields, 'commit'), round: intField(fields, 'round') };
      return fields.quiesce === true ? { ...heartbeat, quiesce: true } : heartbeat;
    }
    case 'heartbeatResp':
      return { type, from, to, term, round: intField(fields, 'round') };
    case 'snapshot':
      return { type, from, to, term, snapshot: parseSnapshot(fields.snapshot) };
    case 'timeoutNow':
      return { type, from, to, term };
    case 'propose':
      return { type, from, to, term, commands: byteArrayList(fields.commands, 'commands') };
    case 'results':
      return { type, from, to, term, results: parseForwardedResults(fields.results) };
    case 'readIndex':
      return { type, from, to, term, context: stringField(fields, 'context') };
    case 'readIndexResp':
      return {
        type,
        from,
        to,
        term,
        context: stringField(fields, 'context'),
        index: intField(fields, 'index', -1),
      };
    case 'admin':
      return { type, from, to, term, request: parseAdminRequest(fields.request) };
  }
}

/** The most results one `results` message carries (RaftNode splits larger sets). */
export const MAX_FORWARDED_RESULTS = 4096;

function parseForwardedResults(value: unknown): ForwardedResult[] {
  if (!Array.isArray(value)) throw new DecodeError('results: expected an array');
  if (value.length > MAX_FORWARDED_RESULTS) throw new DecodeError(`results: more than ${MAX_FORWARDED_RESULTS}`);
  return value.map((item, i) => {
    const fields = fieldsOf(item, `results[${i}]`);
    const result = fields.result;
    // A session result is an object saying whether it succeeded; the rest is the state machine's plain data.
    if (typeof result !== 'object' || result === null || typeof (result as { ok?: unknown }).ok !== 'boolean') {
      throw new DecodeError(`results[${i}].result: expected a session result`);
    }
    return { key: stringField(fields, 'key'), index: intField(fields, 'index', 1), result };
  });
}

/** Validates a forwarded membership change or leadership transfer. */
function parseAdminRequest(value: unknown): AdminRequest {
  const fields = fieldsOf(value, 'request');
  switch (fields.op) {
    case 'change':
      return { op: 'change', change: parseConfigChange(fields.change) };
    case 'addVoter':
      return {
        op: 'addVoter',
        node: nodeIdField(fields, 'node'),
        address: stringField(fields, 'address'),
        catchUpTimeoutMs: intField(fields, 'catchUpTimeoutMs'),
      };
    case 'transfer':
      return { op: 'transfer', to: nodeIdField(fields, 'to') };
    default:
      throw new DecodeError(`request.op: unknown ${String(fields.op)}`);
  }
}
