/**
 * A member of a consumer group that takes over a dead peer's partitions: it heartbeats the group's coordinator
 * (partition 0 of its first topic; membership.ts) every `heartbeatMs`, and runs `consume` for each partition the
 * coordinator assigns it, aborting that run's signal the moment the partition is no longer its own: another
 * generation gave it away, an offset commit was fenced, or no heartbeat was answered for a lease's length (the
 * coordinator may have expired this member already, so it stops before someone else starts).
 *
 * The group's slots are the partitions of `topics`, in that order (topic by topic, partition 0 first); every member
 * must name the same topics in the same order.
 */
import { ServiceError } from '@raftkit/http';
import type { GroupJoin, LogClient } from './client.js';
import { DEFAULT_MEMBER_TTL_MS } from './membership.js';

/**
 * One second: the coordinator's leader answers a heartbeat from memory (no Raft entry), so heartbeats no longer keep
 * the coordinator partition awake, and a 4 s lease (DEFAULT_MEMBER_TTL_MS) survives three lost ones.
 */
export const DEFAULT_HEARTBEAT_MS = 1_000;

export interface PartitionClaim {
  readonly topic: string;
  readonly partition: number;
  /** Aborted when the partition stops being this member's: stop reading it and commit nothing more. */
  readonly signal: AbortSignal;
  /** The group's generation as this member last heard it (commits carry it). */
  readonly generation: number;
  /**
   * The offset to read from: the committed one, committed again under this member's generation, so a member the
   * group moved on from (still running, or paused) has its later commits refused on this partition.
   */
  resume(): Promise<number>;
  /**
   * Commits `offset` if the committed offset is `expect`, under this member's generation. A 409 `stale_generation`
   * (another member owns the partition in a newer generation) aborts the claim before it is thrown.
   */
  commit(offset: number, expect: number): Promise<void>;
}

export interface GroupConsumerOptions {
  topics: readonly string[];
  group: string;
  /** Stable across restarts (e.g. role and index), so a member that comes back gets its partitions back. */
  member: string;
  /** Consumes one partition until `claim.signal` aborts; a rejection is reported to `onError`. */
  consume: (claim: PartitionClaim) => Promise<void>;
  heartbeatMs?: number;
  ttlMs?: number;
  onError?: (error: unknown) => void;
  /** Called when the generation changes (a rebalance), with the coordinator's answer. */
  onRebalance?: (join: GroupJoin) => void;
}

interface Running {
  controller: AbortController;
  claim: PartitionClaim;
}

export class GroupConsumer {
  /** The generation of the last heartbeat answered (0 before the first). */
  generation = 0;
  /** Live members at the last heartbeat answered. */
  members: string[] = [];
  private readonly claims = new Map<string, Running>();
  private readonly runs = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private slots: Array<[topic: string, partition: number]> | null = null;
  private lapse: NodeJS.Timeout | undefined;
  private loop: Promise<void> | null = null;
  private readonly heartbeatMs: number;
  private readonly ttlMs: number;

  constructor(
    private readonly client: LogClient,
    private readonly options: GroupConsumerOptions,
  ) {
    if (options.topics.length === 0) throw new Error('a consumer group consumes at least one topic');
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.ttlMs = options.ttlMs ?? DEFAULT_MEMBER_TTL_MS;
  }

  /** The partitions this member consumes now. */
  get assigned(): Array<{ topic: string; partition: number }> {
    return [...this.claims.values()].map(({ claim }) => ({ topic: claim.topic, partition: claim.partition }));
  }

  start(): void {
    this.loop ??= this.heartbeats();
  }

  /** Stops every partition, waits for their runs, and leaves the group (its partitions move at once). */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.lapse);
    this.take([]);
    await this.loop;
    await Promise.allSettled([...this.runs]);
    try {
      await this.client.leaveGroup(this.options.topics[0]!, this.options.group, this.options.member);
    } catch {
      // The lease ends by itself within ttlMs.
    }
  }

  private async heartbeats(): Promise<void> {
    const { topics, group, member } = this.options;
    while (!this.stopping.signal.aborted) {
      const sent = Date.now();
      try {
        if (this.slots === null) {
          const slots: Array<[string, number]> = [];
          for (const topic of topics) {
            const count = await this.client.partitions(topic);
            for (let p = 0; p < count; p++) slots.push([topic, p]);
          }
          this.slots = slots;
        }
        const join = await this.client.joinGroup(topics[0]!, group, member, this.slots.length, this.ttlMs);
        if (this.stopping.signal.aborted) break;
        // The lease runs from the entry's time, which is after `sent`: stopping at sent + ttl stops in time.
        clearTimeout(this.lapse);
        this.lapse = setTimeout(() => this.take([]), Math.max(0, sent + this.ttlMs - Date.now()));
        const rebalanced = join.generation !== this.generation;
        this.generation = join.generation;
        this.members = join.members;
        if (rebalanced) this.options.onRebalance?.(join);
        this.take(join.assigned.map((slot) => this.slots![slot]!).filter((s) => s !== undefined));
      } catch (e) {
        this.options.onError?.(e);
      }
      await sleep(Math.max(0, sent + this.heartbeatMs - Date.now()), this.stopping.signal);
    }
  }

  /** Makes the running claims exactly `wanted`: aborts the others, starts the new ones. */
  private take(wanted: Array<[string, number]>): void {
    const keys = new Set(wanted.map(([t, p]) => `${t}/${p}`));
    for (const [key, running] of this.claims) {
      if (!keys.has(key)) this.release(key, running);
    }
    if (this.stopping.signal.aborted) return;
    for (const [topic, partition] of wanted) {
      const key = `${topic}/${partition}`;
      if (!this.claims.has(key)) this.claimOf(key, topic, partition);
    }
  }

  private release(key: string, running: Running): void {
    running.controller.abort();
    if (this.claims.get(key) === running) this.claims.delete(key);
  }

  private claimOf(key: string, topic: string, partition: number): void {
    const { client } = this;
    const { group } = this.options;
    const controller = new AbortController();
    const owner = this;
    const claim: PartitionClaim = {
      topic,
      partition,
      signal: controller.signal,
      get generation() {
        return owner.generation;
      },
      async resume() {
        for (;;) {
          const committed = (await client.committed(topic, partition, group)) ?? 0;
          try {
            await this.commit(committed, committed);
            return committed;
          } catch (e) {
            // Moved meanwhile (the previous owner's last commit): fence again at the new offset.
            if (!(e instanceof ServiceError && e.code === 'offset_conflict')) throw e;
          }
        }
      },
      async commit(offset, expect) {
        if (controller.signal.aborted)
          throw new ServiceError(409, 'stale_generation', 'this partition was given away', null);
        try {
          await client.commit(topic, partition, group, offset, expect, owner.generation);
        } catch (e) {
          if (e instanceof ServiceError && e.code === 'stale_generation') owner.release(key, running);
          throw e;
        }
      },
    };
    const running: Running = { controller, claim };
    this.claims.set(key, running);
    const run = this.options
      .consume(claim)
      .catch((e: unknown) => {
        if (!controller.signal.aborted) this.options.onError?.(e);
      })
      .finally(() => {
        this.runs.delete(run);
        // A run that ended by itself while still assigned is started again at the next heartbeat.
        if (this.claims.get(key) === running) this.claims.delete(key);
      });
    this.runs.add(run);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
