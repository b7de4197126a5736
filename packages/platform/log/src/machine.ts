/**
 * One partition of the event log: its records, its idempotent producers and its consumer groups' offsets. Pure and
 * deterministic: time comes from the entry (the leader's stamp), so retention by age trims the same records on
 * every member; nothing here reads a clock, a file or a socket.
 *
 * Offsets count records from 0 and never repeat. A consumer group's committed offset is the next offset it will
 * read (as Kafka's). Records live in memory, bounded by the partition's retention (max_bytes is capped), and go
 * into the snapshot with everything else.
 */
import { Packr } from 'msgpackr';
import {
  CommandShapeError,
  commandOf,
  integerField,
  nullableStringField,
  objectField,
  stringField,
  arrayField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import {
  type CoordinatedGroup,
  type ExpireResult,
  GroupTable,
  type GroupTableSnapshot,
  type GroupView,
  type JoinResult,
  type LeaveResult,
  MAX_GROUP_MEMBERS,
  MAX_GROUP_SLOTS,
  MAX_MEMBER_TTL_MS,
  MIN_MEMBER_TTL_MS,
} from './membership.js';

export const MAX_RECORDS_PER_APPEND = 1000;
/** Appends one `appends` entry may carry. */
const MAX_APPENDS_PER_ENTRY = 1000;
export const MAX_VALUE_BYTES = 1024 * 1024;
export const MAX_KEY_CHARS = 1024;
export const PRODUCER_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const GROUP_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Retention caps: records are held in memory, so a partition may never ask for more than this. */
export const MAX_RETENTION_BYTES = 256 * 1024 * 1024;
export const DEFAULT_RETENTION = { maxAgeMs: 7 * 24 * 3600_000, maxBytes: 64 * 1024 * 1024 } as const;
/** Producers remembered per partition (least recently used forgotten first) and for how long after their last append. */
const MAX_PRODUCERS = 10_000;
const PRODUCER_IDLE_MS = 7 * 24 * 3600_000;
/** Batches remembered per producer, so a producer may have that many appends in flight and retry any of them. */
export const PRODUCER_WINDOW = 5;
/** Consumer groups per partition. */
const MAX_CONSUMER_GROUPS = 10_000;

export interface Retention {
  maxAgeMs: number;
  maxBytes: number;
}

export interface LogRecord {
  offset: number;
  /** Leader-stamped append time, milliseconds. */
  time: number;
  key: string | null;
  value: string;
}

export interface AppendInput {
  key: string | null;
  value: string;
}

export type PartitionCommand =
  /** Append records; with `producer` and `seq`, an append retried with the same sequence is stored once. */
  | { op: 'append'; records: AppendInput[]; producer: string | null; seq: number | null }
  /**
   * Several appends in one entry, applied in order exactly as if each were its own (a member gathers the appends
   * that reach it in one turn of its event loop, so a busy partition costs one Raft entry per turn, not per append).
   */
  | { op: 'appends'; appends: Array<{ records: AppendInput[]; producer: string | null; seq: number | null }> }
  /**
   * Commit a consumer group's next offset; with `expect` not null, only when the committed offset is `expect`; with
   * `generation` (the group's, from its coordinator), only when no commit of a newer generation was seen here
   * (fencing a member the group has moved on from). Entries written before generations existed lack the field.
   */
  | { op: 'commit'; group: string; offset: number; expect: number | null; generation?: number | null }
  /**
   * Join a consumer group coordinated by this partition (membership.ts); a member already in it changes nothing
   * unless it asks for another slot count. Entries written when joins renewed replicated leases read the same.
   */
  | { op: 'join'; group: string; member: string; slots: number; ttlMs: number }
  | { op: 'leave'; group: string; member: string }
  /** Drop members whose leases lapsed on the coordinator leader's clock (lease-keeper.ts). */
  | { op: 'expire'; group: string; members: string[] }
  | { op: 'configure'; retention: Retention }
  /** Apply retention at the entry's time: the leader proposes it when the oldest record is past the age limit, so
   * an idle partition is trimmed too (appends trim as they go). */
  | { op: 'trim' };

export type AppendResult =
  | { op: 'append'; ok: true; base: number; count: number; duplicate: boolean }
  | {
      op: 'append';
      ok: false;
      code: 'out_of_order_sequence' | 'old_sequence' | 'unknown_producer';
      message: string;
      expected: number | null;
    };

export type PartitionResult =
  | AppendResult
  | { op: 'appends'; results: AppendResult[] }
  | { op: 'commit'; ok: true; offset: number }
  | {
      op: 'commit';
      ok: false;
      code: 'offset_conflict' | 'offset_out_of_range' | 'too_many_groups' | 'stale_generation';
      message: string;
      current: number | null;
    }
  | { op: 'configure'; ok: true; retention: Retention }
  | { op: 'trim'; ok: true; start: number }
  | JoinResult
  | LeaveResult
  | ExpireResult;

interface ProducerState {
  /** The last PRODUCER_WINDOW batches: sequence, base offset, count. */
  batches: Array<[seq: number, base: number, count: number]>;
  lastTime: number;
}

export interface FetchResult {
  records: LogRecord[];
  /** The offset after the last record returned (where the next fetch starts). */
  next: number;
  /** The offset the next append will get. */
  end: number;
  /** The oldest offset still held (older ones were removed by retention). */
  start: number;
}

const packr = new Packr({ useRecords: false });

/** Throws CommandShapeError unless `command` is a PartitionCommand (before anything changes). */
export function checkPartitionCommand(command: unknown): asserts command is PartitionCommand {
  const c = commandOf(command, [
    'append',
    'appends',
    'commit',
    'configure',
    'trim',
    'join',
    'leave',
    'expire',
  ] as const);
  if (c.op === 'append') {
    checkAppend(c);
  } else if (c.op === 'appends') {
    const appends = arrayField(
      c,
      'appends',
      (a) => {
        if (typeof a !== 'object' || a === null || Array.isArray(a))
          throw new CommandShapeError('appends: an append is an object');
        checkAppend(a as Record<string, unknown>);
        return a;
      },
      MAX_APPENDS_PER_ENTRY,
    );
    if (appends.length === 0) throw new CommandShapeError('appends: none');
  } else if (c.op === 'commit') {
    const group = stringField(c, 'group', 128);
    if (!GROUP_ID.test(group)) throw new CommandShapeError('commit: group id');
    integerField(c, 'offset');
    if (c.expect !== null) integerField(c, 'expect');
    if (c.generation !== undefined && c.generation !== null) integerField(c, 'generation');
  } else if (c.op === 'join' || c.op === 'leave') {
    const group = stringField(c, 'group', 128);
    if (!GROUP_ID.test(group)) throw new CommandShapeError(`${c.op}: group id`);
    const member = stringField(c, 'member', 128);
    if (!GROUP_ID.test(member)) throw new CommandShapeError(`${c.op}: member id`);
    if (c.op === 'join') {
      integerField(c, 'slots', 0, MAX_GROUP_SLOTS);
      integerField(c, 'ttlMs', MIN_MEMBER_TTL_MS, MAX_MEMBER_TTL_MS);
    }
  } else if (c.op === 'expire') {
    const group = stringField(c, 'group', 128);
    if (!GROUP_ID.test(group)) throw new CommandShapeError('expire: group id');
    const members = c.members;
    if (!Array.isArray(members) || members.length === 0 || members.length > MAX_GROUP_MEMBERS)
      throw new CommandShapeError(`expire: 1..${MAX_GROUP_MEMBERS} members`);
    for (const member of members) {
      if (typeof member !== 'string' || !GROUP_ID.test(member)) throw new CommandShapeError('expire: member id');
    }
  } else if (c.op === 'configure') {
    const retention = objectField(c, 'retention');
    integerField(retention, 'maxAgeMs', 1);
    integerField(retention, 'maxBytes', 1, MAX_RETENTION_BYTES);
  }
}

/** The fields of one append (alone or inside `appends`). */
function checkAppend(c: Record<string, unknown>): void {
  const records = arrayField(
    c,
    'records',
    (r) => {
      if (typeof r !== 'object' || r === null || Array.isArray(r))
        throw new CommandShapeError('append: a record is an object');
      nullableStringField(r as Record<string, unknown>, 'key', MAX_KEY_CHARS);
      stringField(r as Record<string, unknown>, 'value', MAX_VALUE_BYTES, 0);
      return r;
    },
    MAX_RECORDS_PER_APPEND,
  );
  if (records.length === 0) throw new CommandShapeError('append: no records');
  const producer = nullableStringField(c, 'producer', 128);
  if (producer !== null && !PRODUCER_ID.test(producer)) throw new CommandShapeError('append: producer id');
  if (producer === null ? c.seq !== null : typeof c.seq !== 'number')
    throw new CommandShapeError('append: seq goes with producer');
  if (producer !== null) integerField(c, 'seq');
}

export class PartitionMachine implements StateMachine<PartitionCommand, PartitionResult> {
  /** Held records, oldest first, from `head` (earlier slots are trimmed away lazily). */
  private records: LogRecord[] = [];
  private head = 0;
  private startOffset = 0;
  private bytes = 0;
  private retention: Retention = { ...DEFAULT_RETENTION };
  /** Insertion order is recency order: a producer is moved to the end on each append. */
  private producers = new Map<string, ProducerState>();
  private offsets = new Map<string, number>();
  /** Per consumer group, the newest generation a commit carried here: an older one is refused. */
  private fences = new Map<string, number>();
  /** The consumer groups this partition coordinates (only partition 0 of a topic is asked to). */
  private membership = new GroupTable();

  /** The offset the next append gets. */
  get end(): number {
    return this.startOffset + (this.records.length - this.head);
  }

  /** The oldest offset held. */
  get start(): number {
    return this.startOffset;
  }

  /** Bytes of keys and values held. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** The append time of the oldest record held, or null when none is held. */
  get oldestTime(): number | null {
    return this.head < this.records.length ? this.records[this.head]!.time : null;
  }

  get config(): Retention {
    return { ...this.retention };
  }

  /** A consumer group's committed offset, or null when it never committed. */
  committed(group: string): number | null {
    return this.offsets.get(group) ?? null;
  }

  /** Consumer groups with their committed offsets. */
  groups(): Array<[string, number]> {
    return [...this.offsets];
  }

  /** A coordinated group's generation, slot count and members, or null when unknown. */
  consumerGroup(group: string): GroupView | null {
    return this.membership.view(group);
  }

  /** A member's lease length in a coordinated group, or null when it is not a member. */
  memberTtl(group: string, member: string): number | null {
    return this.membership.ttlOf(group, member);
  }

  /** The coordinated groups that have members, with their lease lengths (for the leader's lease keeping). */
  coordinatedGroups(): CoordinatedGroup[] {
    return this.membership.coordinated();
  }

  producerCount(): number {
    return this.producers.size;
  }

  /**
   * Records from `offset` on, at most `maxRecords` and about `maxBytes` (at least one record when there is one).
   * An offset before `start` reads from `start` (those records are gone); one past `end` reads nothing (a replica
   * that has not applied every committed record yet may be behind the consumer).
   */
  fetch(offset: number, maxRecords: number, maxBytes: number): FetchResult {
    const from = Math.max(offset, this.startOffset);
    const out: LogRecord[] = [];
    let size = 0;
    for (let i = this.head + (from - this.startOffset); i < this.records.length && out.length < maxRecords; i++) {
      const record = this.records[i]!;
      const recordBytes = recordSize(record);
      if (out.length > 0 && size + recordBytes > maxBytes) break;
      out.push(record);
      size += recordBytes;
    }
    // Past the end, the position stays: this replica may not have applied every committed record yet.
    const next = out.length > 0 ? out[out.length - 1]!.offset + 1 : from;
    return { records: out, next, end: this.end, start: this.startOffset };
  }

  apply(command: PartitionCommand, context: ApplyContext): PartitionResult {
    checkPartitionCommand(command);
    switch (command.op) {
      case 'append':
        return this.append(command, context.time);
      case 'appends':
        return {
          op: 'appends',
          results: command.appends.map((a) => this.append({ op: 'append', ...a }, context.time)),
        };
      case 'commit':
        return this.commit(command);
      case 'configure':
        this.retention = { maxAgeMs: command.retention.maxAgeMs, maxBytes: command.retention.maxBytes };
        this.trim(context.time);
        return { op: 'configure', ok: true, retention: this.config };
      case 'trim':
        this.trim(context.time);
        return { op: 'trim', ok: true, start: this.startOffset };
      case 'join':
        return this.membership.join(command.group, command.member, command.slots, command.ttlMs);
      case 'leave':
        return this.membership.leave(command.group, command.member);
      case 'expire':
        return this.membership.expire(command.group, command.members);
    }
  }

  private append(command: Extract<PartitionCommand, { op: 'append' }>, time: number): AppendResult {
    this.forgetIdleProducers(time);
    let producer: ProducerState | undefined;
    if (command.producer !== null) {
      const seq = command.seq!;
      producer = this.producers.get(command.producer);
      if (producer !== undefined) {
        const batch = producer.batches.find(([s]) => s === seq);
        if (batch !== undefined) return { op: 'append', ok: true, base: batch[1], count: batch[2], duplicate: true };
        const last = producer.batches[producer.batches.length - 1]![0];
        if (seq <= last) {
          // Sequences are taken one by one from 0, so this batch was stored; only its offsets are forgotten.
          return {
            op: 'append',
            ok: false,
            code: 'old_sequence',
            message: `sequence ${seq} was stored earlier but is older than the last ${PRODUCER_WINDOW} batches of this producer (last ${last}); its offsets are forgotten`,
            expected: last + 1,
          };
        }
        if (seq !== last + 1) {
          return {
            op: 'append',
            ok: false,
            code: 'out_of_order_sequence',
            message: `expected sequence ${last + 1}, got ${seq}`,
            expected: last + 1,
          };
        }
      } else if (seq !== 0) {
        // A producer this partition does not know (new, or forgotten after PRODUCER_IDLE_MS) starts at 0: a later
        // sequence may be the retry of a batch whose record was forgotten, which cannot be told from a new one.
        return {
          op: 'append',
          ok: false,
          code: 'unknown_producer',
          message: `producer ${command.producer} is not known here: start at sequence 0`,
          expected: 0,
        };
      }
    }
    const base = this.end;
    for (const input of command.records) {
      const record: LogRecord = { offset: this.end, time, key: input.key, value: input.value };
      this.records.push(record);
      this.bytes += recordSize(record);
    }
    if (command.producer !== null) {
      const state = producer ?? { batches: [], lastTime: time };
      state.batches.push([command.seq!, base, command.records.length]);
      if (state.batches.length > PRODUCER_WINDOW) state.batches.shift();
      state.lastTime = time;
      this.producers.delete(command.producer);
      this.producers.set(command.producer, state);
      if (this.producers.size > MAX_PRODUCERS) this.producers.delete(this.producers.keys().next().value!);
    }
    this.trim(time);
    return { op: 'append', ok: true, base, count: command.records.length, duplicate: false };
  }

  private commit(command: Extract<PartitionCommand, { op: 'commit' }>): PartitionResult {
    const current = this.offsets.get(command.group) ?? null;
    const generation = command.generation ?? null;
    const fence = this.fences.get(command.group);
    if (generation !== null && fence !== undefined && generation < fence) {
      return {
        op: 'commit',
        ok: false,
        code: 'stale_generation',
        message: `generation ${generation} is stale: a member of generation ${fence} committed here`,
        current,
      };
    }
    if (command.expect !== null && command.expect !== (current ?? 0)) {
      return {
        op: 'commit',
        ok: false,
        code: 'offset_conflict',
        message: `the committed offset is ${current ?? 0}, not ${command.expect}`,
        current,
      };
    }
    if (command.offset > this.end) {
      return {
        op: 'commit',
        ok: false,
        code: 'offset_out_of_range',
        message: `offset ${command.offset} is past the end ${this.end}`,
        current,
      };
    }
    if (current === null && this.offsets.size >= MAX_CONSUMER_GROUPS) {
      return {
        op: 'commit',
        ok: false,
        code: 'too_many_groups',
        message: `a partition keeps at most ${MAX_CONSUMER_GROUPS} consumer groups`,
        current,
      };
    }
    this.offsets.set(command.group, command.offset);
    if (generation !== null) this.fences.set(command.group, generation);
    return { op: 'commit', ok: true, offset: command.offset };
  }

  /** Drops the oldest records while they are older than max age or the partition holds more than max bytes. */
  private trim(now: number): void {
    const oldest = now - this.retention.maxAgeMs;
    while (this.head < this.records.length) {
      const record = this.records[this.head]!;
      if (record.time >= oldest && this.bytes <= this.retention.maxBytes) break;
      this.bytes -= recordSize(record);
      this.head++;
      this.startOffset++;
    }
    // Compact the array once the dead slots are half of it.
    if (this.head > 1024 && this.head * 2 > this.records.length) {
      this.records = this.records.slice(this.head);
      this.head = 0;
    }
  }

  private forgetIdleProducers(now: number): void {
    for (const [id, state] of this.producers) {
      if (now - state.lastTime <= PRODUCER_IDLE_MS) break;
      this.producers.delete(id);
    }
  }

  snapshot(): Uint8Array {
    return packr.pack({
      records: this.records.slice(this.head),
      start: this.startOffset,
      retention: this.retention,
      producers: [...this.producers],
      offsets: [...this.offsets],
      fences: [...this.fences],
      membership: this.membership.snapshot(),
    });
  }

  restore(data: Uint8Array): void {
    const state = packr.unpack(data) as {
      records: LogRecord[];
      start: number;
      retention: Retention;
      producers: Array<[string, ProducerState]>;
      offsets: Array<[string, number]>;
      fences?: Array<[string, number]>;
      membership?: GroupTableSnapshot;
    };
    this.records = state.records;
    this.head = 0;
    this.startOffset = state.start;
    this.bytes = state.records.reduce((sum, r) => sum + recordSize(r), 0);
    this.retention = state.retention;
    this.producers = new Map(state.producers);
    this.offsets = new Map(state.offsets);
    this.fences = new Map(state.fences ?? []);
    this.membership.restore(state.membership);
  }
}

/** What a record counts for in retention and fetch sizes: its key and value bytes plus a fixed overhead. */
export function recordSize(record: { key: string | null; value: string }): number {
  return 32 + Buffer.byteLength(record.value) + (record.key === null ? 0 : Buffer.byteLength(record.key));
}
