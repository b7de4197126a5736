/**
 * Acquires and releases go to the Raft log in `batch` entries: a busy member pays for one entry, one encoding,
 * one session record, one forwarded proposal and one apply per batch instead of one per request. A lone command
 * still goes as itself.
 *
 * Paced: a member keeps at most `maxInFlight` batches in the log's pipeline (proposed and not yet answered);
 * what arrives meanwhile waits and leaves as the next batch when one is answered. Every Raft entry costs each of
 * the 5 members a log write, a round of messages and an apply, and on 2 cores that cost, not the wait, is what
 * bounds the rate at 50 ms: with one batch per turn (the shared DistinctNameBatcher) a member at 600 requests a
 * second sent 1-3 commands per entry; paced, the batch grows with the load by itself (a request waits at most
 * for the batch ahead of it, about one commit round) and a quiet member still sends each request at once.
 * A batch that is not answered within `holdMs` (a lost forward retried after a leader change, a partition) stops
 * holding the others back: its slot is freed, so a stuck entry delays what follows by at most `holdMs`.
 *
 * Two commands on the same lock name never share a batch: the machine stamps a lock's revision with the entry's
 * index, and a watcher that asks for changes after revision R must not miss a second change made under the same R.
 * Commands on one name leave in arrival order (the second goes with a later batch); commands on different names
 * may overtake one another, as concurrent requests.
 */
import { MAX_BATCH_COMMANDS, type BatchableCommand, type LockCommand, type LockResult } from './machine.js';

export type Propose = (command: LockCommand) => Promise<LockResult>;

export interface LockBatcherOptions {
  /** Batches a member keeps proposed and unanswered at once (default 1). */
  maxInFlight?: number;
  /** After this long unanswered, a batch no longer counts against maxInFlight (default 100 ms). */
  holdMs?: number;
  /** The most commands in one batch (the machine's cap). */
  maxItems?: number;
}

interface Waiting {
  propose: Propose;
  command: BatchableCommand;
  resolve: (result: LockResult) => void;
  reject: (error: unknown) => void;
}

/** A batch in the pipeline: it holds a slot until answered or until `holdMs` after it was sent. */
interface InFlight {
  sentAt: number;
  holding: boolean;
}

export class LockBatcher {
  private readonly maxInFlight: number;
  private readonly holdMs: number;
  private readonly maxItems: number;
  private queue: Waiting[] = [];
  /** Batches sent and still holding a slot, oldest first. */
  private readonly inFlight: InFlight[] = [];
  private flushScheduled = false;
  private holdTimer: NodeJS.Timeout | null = null;
  /** Entries proposed, for metrics. */
  entries = 0;
  /** Commands those entries carried. */
  commands = 0;

  constructor(options: LockBatcherOptions = {}) {
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 1);
    this.holdMs = options.holdMs ?? 100;
    this.maxItems = Math.min(options.maxItems ?? MAX_BATCH_COMMANDS, MAX_BATCH_COMMANDS);
  }

  /** Commands waiting for a batch, for tests and backpressure. */
  get waiting(): number {
    return this.queue.length;
  }

  submit(propose: Propose, command: BatchableCommand): Promise<LockResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ propose, command, resolve, reject });
      this.scheduleFlush();
    });
  }

  /** Flushes once this turn is over, so what arrives during it joins one batch. */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.queue.length === 0) return;
    if (this.inFlight.length >= this.maxInFlight) {
      this.armHoldTimer();
      return;
    }
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight.length < this.maxInFlight) this.send(this.take());
    if (this.queue.length > 0) this.armHoldTimer();
  }

  /** The next batch: waiting commands in arrival order, at most one per lock name, the rest left waiting in order. */
  private take(): Waiting[] {
    const batch: Waiting[] = [];
    const names = new Set<string>();
    const rest: Waiting[] = [];
    for (const w of this.queue) {
      if (batch.length < this.maxItems && !names.has(w.command.name)) {
        names.add(w.command.name);
        batch.push(w);
      } else {
        rest.push(w);
      }
    }
    this.queue = rest;
    return batch;
  }

  private send(batch: Waiting[]): void {
    this.entries++;
    this.commands += batch.length;
    const slot: InFlight = { sentAt: performance.now(), holding: true };
    this.inFlight.push(slot);
    const done = (): void => {
      if (!slot.holding) return;
      slot.holding = false;
      this.inFlight.splice(this.inFlight.indexOf(slot), 1);
      this.scheduleFlush();
    };
    let answered: Promise<LockResult[]>;
    try {
      answered = proposeBatch(batch[0]!.propose, batch.map((w) => w.command));
    } catch (error) {
      answered = Promise.reject(error);
    }
    answered.then(
      (results) => {
        done();
        batch.forEach((w, n) => w.resolve(results[n]!));
      },
      (error: unknown) => {
        done();
        for (const w of batch) w.reject(error);
      },
    );
  }

  /** One timer for the oldest batch that holds a slot: when it passes holdMs, its slot goes to the waiting. */
  private armHoldTimer(): void {
    if (this.holdTimer !== null) return;
    const oldest = this.inFlight[0];
    if (oldest === undefined) return;
    const wait = Math.max(0, oldest.sentAt + this.holdMs - performance.now());
    this.holdTimer = setTimeout(() => {
      this.holdTimer = null;
      const now = performance.now();
      while (this.inFlight.length > 0 && this.inFlight[0]!.sentAt + this.holdMs <= now) this.inFlight.shift()!.holding = false;
      this.scheduleFlush();
      if (this.queue.length > 0 && this.inFlight.length >= this.maxInFlight) this.armHoldTimer();
    }, wait);
    this.holdTimer.unref();
  }
}

async function proposeBatch(propose: Propose, commands: BatchableCommand[]): Promise<LockResult[]> {
  if (commands.length === 1) return [await propose(commands[0]!)];
  const result = await propose({ op: 'batch', commands });
  if (!result.ok || result.op !== 'batch' || result.results.length !== commands.length) throw new Error('unexpected result of a batch of lock commands');
  return result.results;
}
