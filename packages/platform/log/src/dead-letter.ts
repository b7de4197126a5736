/**
 * Poison records: a consumer's decode step may reject a record (not JSON, not the shape its topic carries); such a
 * record is written to a dead-letter topic with its reason, source topic, partition and offset, and the records
 * around it are processed as usual. A rejected record counts as handled only once its dead-letter copy is
 * acknowledged, so a consumer that commits after handling a batch never moves its offset past a record that was
 * neither processed nor dead-lettered.
 *
 * The dead-letter record's value is JSON: `{topic, partition, offset, key, reason, time, value}` where `value` is
 * the original text, cut to its first DEAD_LETTER_VALUE_CHARS characters (`value_chars` then gives its length) so
 * the copy always fits an append. Appends are not idempotent here (no producer id): a dead-letter write retried
 * after an unknown outcome may be stored twice; topic, partition and offset identify the original.
 */
import type { ConsumedRecord, LogClient, LogConsumer } from './client.js';

/**
 * Characters of the original value kept in a dead-letter record: an append body is at most 1 MiB, and a value is
 * escaped twice on the way (in the letter's JSON, then in the body's), 7 bytes per character at worst.
 */
export const DEAD_LETTER_VALUE_CHARS = 100_000;
/** Bytes of dead letters sent in one append (one letter alone may be up to ~700 KB). */
const APPEND_BYTES = 256 * 1024;
/** Characters of a rejection reason kept. */
export const DEAD_LETTER_REASON_CHARS = 1_000;

/** A decode step: the record's payload, or a throw whose message says why the record is refused. */
export type RecordDecoder<T> = (value: string, record: ConsumedRecord) => T;

/** A decoded record: the original and what decode made of it. */
export type Decoded<T> = ConsumedRecord & { decoded: T };

/** What a dead-letter topic holds per rejected record. */
export interface DeadLetter {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  reason: string;
  time: number;
  value: string;
  value_chars?: number;
}

export class DeadLetterQueue {
  /** Rejected records written (for metrics). */
  written = 0;

  constructor(
    private readonly client: LogClient,
    readonly topic: string,
  ) {}

  /** Writes rejected records of `sourceTopic` (one append, partition 0); resolves once stored. */
  async put(sourceTopic: string, rejected: ReadonlyArray<{ record: ConsumedRecord; reason: string }>): Promise<void> {
    if (rejected.length === 0) return;
    const records = rejected.map(({ record, reason }) => {
      const letter: DeadLetter = {
        topic: sourceTopic,
        partition: record.partition,
        offset: record.offset,
        key: record.key,
        reason: reason.slice(0, DEAD_LETTER_REASON_CHARS),
        time: record.time,
        value: record.value.slice(0, DEAD_LETTER_VALUE_CHARS),
        ...(record.value.length > DEAD_LETTER_VALUE_CHARS ? { value_chars: record.value.length } : {}),
      };
      return { key: `${sourceTopic}/${record.partition}/${record.offset}`, value: JSON.stringify(letter) };
    });
    let batch: typeof records = [];
    let bytes = 0;
    for (const r of records) {
      const size = Buffer.byteLength(JSON.stringify(r.value)) + r.key.length + 32;
      if (batch.length > 0 && bytes + size > APPEND_BYTES) {
        await this.client.append(this.topic, 0, batch);
        batch = [];
        bytes = 0;
      }
      batch.push(r);
      bytes += size;
    }
    await this.client.append(this.topic, 0, batch);
    this.written += records.length;
  }
}

/**
 * Decodes records; the ones decode refuses go to the dead-letter queue (awaited) and are left out of the answer.
 * Throws when the dead-letter write fails: then nothing of the batch may be taken as handled.
 */
export async function decodeOrDeadLetter<T>(
  topic: string,
  records: readonly ConsumedRecord[],
  decode: RecordDecoder<T>,
  dead: DeadLetterQueue,
): Promise<Array<Decoded<T>>> {
  const good: Array<Decoded<T>> = [];
  const rejected: Array<{ record: ConsumedRecord; reason: string }> = [];
  for (const record of records) {
    try {
      good.push({ ...record, decoded: decode(record.value, record) });
    } catch (error) {
      rejected.push({ record, reason: error instanceof Error ? error.message : String(error) });
    }
  }
  await dead.put(topic, rejected);
  return good;
}

/**
 * A LogConsumer with a decode step: `poll` answers the decoded records of a batch after its rejected ones are in the
 * dead-letter topic; when that write fails, the partition is read again from the batch's first offset (nothing is
 * skipped). `commit` after handling what `poll` answered; `rewind` after failing to handle it.
 */
export class CheckedConsumer<T> {
  /** Per partition, the offset after the last record polled (decoded or dead-lettered). */
  readonly polledTo = new Map<number, number>();

  constructor(
    readonly consumer: LogConsumer,
    private readonly decode: RecordDecoder<T>,
    readonly deadLetters: DeadLetterQueue,
  ) {}

  async poll(): Promise<Array<Decoded<T>>> {
    const records = await this.consumer.poll();
    if (records.length === 0) return [];
    try {
      const good = await decodeOrDeadLetter(this.consumer.topic, records, this.decode, this.deadLetters);
      const last = records[records.length - 1]!;
      this.polledTo.set(last.partition, Math.max(this.polledTo.get(last.partition) ?? 0, last.offset + 1));
      return good;
    } catch (error) {
      this.consumer.seek(records[0]!.partition, records[0]!.offset);
      throw error;
    }
  }

  commit(): Promise<void> {
    return this.consumer.commit();
  }

  /** Forgets every position not committed: the next poll reads again from the committed offsets. */
  rewind(): void {
    this.consumer.rewind();
  }
}
