/**
 * The fan-out worker role (`cluster up` starts FANOUT_COUNT): consumer group `fanout` of `feed-posts` and
 * `feed-deletes`, member `fanout-<k>`. The group's coordinator in the log assigns the partitions of both topics
 * over the live workers (GroupConsumer): with every worker up, worker k takes the slots s with s % count == k - 1;
 * a worker that dies hands its partitions to the others when its lease lapses (4 s), and gets them back when it
 * returns. Each partition starts at the committed offset, fenced under the worker's generation.
 *
 * A post event: the author's profile decides (spec rule 2): is_celebrity -> outbox only (pulled at read time);
 * otherwise the outbox and every follower's inbox, page by page of the followers list, each write queued on the
 * follower's store partition (PartitionWriter). A delete event removes the outbox entry and the inbox entries of
 * every follower (whatever the author's flag is now: entries pushed before a threshold crossing are removed too).
 *
 * Offsets: an event's offset is committed once every write it caused is stored, and never past an event that is
 * still waiting; a store partition with no replica up holds back the commit (and, once MAX_WAITING events wait, the
 * reading) of the log partitions whose events need it, while writes to other store partitions go on. After a
 * crash of this worker the group resumes at the committed offset and the writes are replayed (they are
 * idempotent: an inbox key is the user, the time and the post id).
 *
 * Poison records: a record that is not an event, or an event a store refuses (4xx), is written to
 * `feed-dead-letter` with its reason; it stays unfinished (holding the commit) until that write is stored.
 */
import {
  clusterUrl,
  ServiceError,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
  serveWorkerHttp,
} from '@raftkit/http';
import { DeadLetterQueue, GroupConsumer, LogClient, type LogRecord, type PartitionClaim } from '@raftkit/log';
import { DEAD_LETTER_TOPIC, decodeEvent, ensureTopics, type DeleteEvent, type PostEvent } from '../../events.js';
import { PartitionWriter } from './partition-writer.js';
import { DELETES_TOPIC, POSTS_TOPIC } from '../../rank-wire.js';
import { StoreClient } from '../../store-client.js';
import type { InboxWrite } from '../../store-protocol.js';

export const FANOUT_ROLE = 'fanout';
export const FANOUT_COUNT = 2;
export const CONSUMER_GROUP = 'fanout';
/** Followers read per page of the followers list. */
const FOLLOWER_PAGE = 2_000;
/** Events of one log partition in progress at once; more wait in the log. */
const MAX_WAITING = 1_000;
const COMMIT_EVERY_MS = 200;

export const fanoutRole: WorkerRole = { role: FANOUT_ROLE, count: FANOUT_COUNT, start: startFanout };

interface Stats {
  events: number;
  pushed: number;
  pulled: number;
  deletes: number;
  inboxWrites: number;
}

async function startFanout(options: WorkerOptions): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const log = new LogClient({
    endpoints: options.members.map((m) => clusterUrl(m.httpAddress)),
    token,
    timeoutMs: 10_000,
  });
  const stores = StoreClient.fromWorkers(options.workers, token);
  const writers = Array.from({ length: stores.partitions }, (_, p) => new PartitionWriter(stores, p));
  const stats: Stats = { events: 0, pushed: 0, pulled: 0, deletes: 0, inboxWrites: 0 };
  let stopped = false;
  const loops: Array<{ topic: string; partition: number; committed: number; position: number; waiting: number }> = [];

  let group: GroupConsumer | null = null;
  const http = await serveWorkerHttp(options, {
    health: () => ({
      ...stats,
      generation: group?.generation ?? 0,
      members: group?.members ?? [],
      loops: loops.map((l) => ({
        topic: l.topic,
        partition: l.partition,
        committed: l.committed,
        position: l.position,
        waiting: l.waiting,
      })),
      stores: writers.map((w) => ({
        partition: w.partition,
        queued: w.queued,
        failures: w.failures,
        written: w.written,
        stalled_ms: w.stalledSince === null ? 0 : Date.now() - w.stalledSince,
      })),
    }),
  });
  http.metrics.gauge('feed_fanout_inbox_writes_total', 'Inbox entries this worker stored').set(() => stats.inboxWrites);
  http.metrics.gauge('feed_fanout_events_total', 'Post and delete events this worker finished').set(() => stats.events);
  // Poison records (not an event, or refused by a store) go here with their reason; their neighbours are fanned out.
  const deadLetters = new DeadLetterQueue(log, DEAD_LETTER_TOPIC);
  http.metrics
    .gauge('feed_fanout_dead_lettered', 'Records written to the dead-letter topic')
    .set(() => deadLetters.written);

  /** Stores a refused record in the dead-letter topic, retried until it is (its offset is not committed before). */
  const deadLetter = async (topic: string, partition: number, record: LogRecord, reason: string): Promise<void> => {
    let backoff = 100;
    for (;;) {
      try {
        await deadLetters.put(topic, [{ record: { ...record, partition }, reason }]);
        options.logger.log('warn', 'fan-out record dead-lettered', { topic, partition, offset: record.offset, reason });
        return;
      } catch (e) {
        if (stopped) throw e;
        options.logger.log('warn', 'dead-letter write failed; retrying', {
          topic,
          partition,
          offset: record.offset,
          error: String(e),
        });
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(2_000, backoff * 2);
      }
    }
  };

  /** Retries a store read until it answers (an outage of that partition stalls only this event). */
  const retry = async <T>(work: () => Promise<T>): Promise<T> => {
    let backoff = 50;
    for (;;) {
      try {
        return await work();
      } catch (e) {
        if (stopped) throw e;
        if (e instanceof ServiceError && e.status >= 400 && e.status < 500) throw e;
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(2_000, backoff * 2);
      }
    }
  };

  /** Every follower of the author, page by page, handed to `each` grouped by store partition. */
  const forFollowers = async (
    author: string,
    each: (partition: number, users: string[]) => Promise<void>,
  ): Promise<void> => {
    let after = '';
    for (;;) {
      const page = await retry(() =>
        stores.call(author, { op: 'followers', user: author, limit: FOLLOWER_PAGE, after }),
      );
      const writes: Array<Promise<void>> = [];
      for (const [partition, users] of stores.byPartition(
        page.edges.map((e) => e.user_id),
        (u) => u,
      ))
        writes.push(each(partition, users));
      await Promise.all(writes);
      if (page.edges.length < FOLLOWER_PAGE) return;
      after = page.edges[page.edges.length - 1]!.user_id;
    }
  };

  const onPost = async (e: PostEvent): Promise<void> => {
    const entry = { post_id: e.post_id, author_id: e.author_id, created_at: e.created_at };
    const [profile] = (await retry(() => stores.call(e.author_id, { op: 'profiles', users: [e.author_id] }))).profiles;
    // Straight to the author's partition, not behind that partition's queue of inbox writes: a pulled author's post
    // is visible once this entry is stored, so it must not wait for another author's fan-out.
    const outbox = retry(() => stores.call(e.author_id, { op: 'add_outbox', entries: [entry] }));
    if (profile!.is_celebrity) {
      stats.pulled++;
      await outbox;
      return;
    }
    stats.pushed++;
    await forFollowers(e.author_id, async (partition, users) => {
      const entries: InboxWrite[] = users.map((user_id) => ({ ...entry, user_id }));
      await writers[partition]!.write('add_inbox', entries);
      stats.inboxWrites += entries.length;
    });
    await outbox;
  };

  const onDelete = async (e: DeleteEvent): Promise<void> => {
    const entry = { post_id: e.post_id, author_id: e.author_id, created_at: e.created_at };
    stats.deletes++;
    const outbox = retry(() => stores.call(e.author_id, { op: 'remove_outbox', entries: [entry] }));
    await forFollowers(e.author_id, (partition, users) =>
      writers[partition]!.write(
        'remove_inbox',
        users.map((user_id) => ({ ...entry, user_id })),
      ),
    );
    await outbox;
  };

  /**
   * One log partition while it is this worker's: read, start each event, commit up to the oldest event not
   * finished. Events started before the partition moved away finish (their writes are idempotent) but commit
   * nothing: the new owner resumes at the committed offset.
   */
  const consume = async (claim: PartitionClaim): Promise<void> => {
    const { topic, partition, signal } = claim;
    const gone = () => stopped || signal.aborted;
    const state = { topic, partition, committed: 0, position: 0, waiting: 0 };
    const unfinished = new Set<number>();
    for (;;) {
      try {
        state.committed = await claim.resume();
        break;
      } catch {
        if (gone()) return;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    loops.push(state);
    state.position = state.committed;
    let lastCommit = Date.now();
    const commit = async (): Promise<void> => {
      const upTo = unfinished.size === 0 ? state.position : Math.min(...unfinished);
      if (upTo <= state.committed) return;
      try {
        await claim.commit(upTo, state.committed);
        state.committed = upTo;
      } catch (e) {
        // Another worker moved it (a restart overlapped): reread from what is committed; writes are idempotent.
        if (e instanceof ServiceError && e.code === 'offset_conflict') {
          const now = (await log.committed(topic, partition, CONSUMER_GROUP)) ?? 0;
          state.committed = now;
        }
      }
    };
    while (!gone()) {
      if (unfinished.size >= MAX_WAITING) {
        await new Promise((r) => setTimeout(r, 50));
      } else {
        try {
          const answer = await log.fetch(topic, partition, state.position, {
            maxRecords: 200,
            waitMs: unfinished.size > 0 ? 100 : 1_000,
          });
          if (gone()) break; // given away during the long poll: the new owner reads these
          for (const record of answer.records) {
            let event: PostEvent | DeleteEvent | null = null;
            let refused = '';
            try {
              event = decodeEvent(record.value);
            } catch (e) {
              refused = (e as Error).message;
            }
            unfinished.add(record.offset);
            state.waiting = unfinished.size;
            const work =
              event === null
                ? deadLetter(topic, partition, record, refused)
                : (event.type === 'post' ? onPost(event) : onDelete(event)).then(
                    () => void stats.events++,
                    (err: unknown) => {
                      // A 4xx from a store (an event it refuses): dead-lettered with the store's answer.
                      if (err instanceof ServiceError && err.status >= 400 && err.status < 500)
                        return deadLetter(
                          topic,
                          partition,
                          record,
                          `refused by the store: ${err.status} ${err.code}: ${err.message}`,
                        );
                      throw err;
                    },
                  );
            work.then(
              () => {
                unfinished.delete(record.offset);
                state.waiting = unfinished.size;
              },
              // Only when stopping: the offset stays unfinished, so nothing past it is committed.
              () => undefined,
            );
          }
          state.position = answer.next_offset;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      if (Date.now() - lastCommit >= COMMIT_EVERY_MS) {
        lastCommit = Date.now();
        await commit();
      }
    }
    loops.splice(loops.indexOf(state), 1);
  };

  const started = (async () => {
    // Topics first, retried until the log answers (members may still be electing).
    while (!stopped) {
      try {
        await ensureTopics(log);
        break;
      } catch (e) {
        options.logger.log('warn', 'topics not ready; retrying', { error: String(e) });
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    if (stopped) return;
    group = new GroupConsumer(log, {
      topics: [POSTS_TOPIC, DELETES_TOPIC],
      group: CONSUMER_GROUP,
      member: `${FANOUT_ROLE}-${options.index}`,
      consume,
      onRebalance: (join) =>
        options.logger.log('info', 'fan-out partitions rebalanced', {
          generation: join.generation,
          members: join.members,
          assigned: join.assigned,
        }),
      onError: (e) => options.logger.log('warn', 'fan-out group heartbeat or partition failed', { error: String(e) }),
    });
    group.start();
  })().catch((e: unknown) => options.logger.log('error', 'fan-out stopped', { error: String(e) }));

  return {
    httpPort: http.port,
    async stop() {
      stopped = true;
      for (const w of writers) w.close();
      await Promise.race([started.then(() => group?.stop()), new Promise((r) => setTimeout(r, 2_000))]);
      await http.close();
      await log.close();
      await stores.close();
    },
  };
}
