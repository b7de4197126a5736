/**
 * LevelStorage writes the hard state's own key only for a new term or vote (or a hard state with no entries to go
 * with); a newer commit index alone is recorded in the block of entries written with it. With the key in every
 * write, every LevelDB table held it beside the log's keys, the tables of an append-only log overlapped, and
 * every compaction rewrote the log (bench/RESULTS.md, kv, findings). load() still returns the last hard state written.
 * A real LevelDB, its batch calls recorded.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import t from 'tap';
import { encodeValue } from '../src/codec/msgpack.js';
import { LevelStorage } from '../src/storage/leveldb.js';
import type { Entry } from '../src/types.js';

const entries = (from: number, to: number, term: number): Entry[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({
    index: from + i,
    term,
    time: 1,
    kind: 'command' as const,
    data: Uint8Array.of(from + i),
  }));

t.test(
  'a commit index alone rides in the block; a new term or vote gets the hard-state key; load sees the last',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'raft-hard-state-writes-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const db = new Level(dir);
    await db.open();
    t.teardown(() => db.close());
    const puts: string[] = [];
    const batch = db.batch.bind(db) as (ops: Array<{ type: string; key: string }>, options?: unknown) => Promise<void>;
    (db as unknown as { batch: typeof batch }).batch = (ops, options) => {
      for (const op of ops) if (op.type === 'put') puts.push(op.key);
      return batch(ops, options);
    };
    const open = (): LevelStorage => new LevelStorage({ db, prefix: 'g' });
    const hardStateWrites = (): number => puts.filter((k) => k === 'g!!hs').length;

    let storage = open();
    await storage.load();
    await storage.append([], { term: 1, vote: 'a', commit: 0 });
    t.equal(hardStateWrites(), 1, 'a new term and vote: the hard-state key');
    await storage.append(entries(1, 3, 1), { term: 1, vote: 'a', commit: 1 });
    await storage.append(entries(4, 6, 1), { term: 1, vote: 'a', commit: 3 });
    await storage.append(entries(7, 7, 1), null);
    t.equal(hardStateWrites(), 1, 'a commit index alone does not touch the hard-state key');
    t.equal(puts.filter((k) => k.startsWith('g!e!')).length, 3, 'each append wrote its block');

    await storage.close();
    storage = open();
    let loaded = await storage.load();
    t.same(
      loaded.hardState,
      { term: 1, vote: 'a', commit: 3 },
      'reopened: the last hard state written, its commit index from the block',
    );
    t.equal(loaded.entries.length, 7, 'and every entry');

    await storage.append([], { term: 1, vote: 'a', commit: 6 });
    t.equal(hardStateWrites(), 2, 'no entries to carry it (a clean stop): the hard-state key');
    await storage.close();
    storage = open();
    loaded = await storage.load();
    t.same(loaded.hardState, { term: 1, vote: 'a', commit: 6 }, 'the key written after the block is the newer');

    await storage.append(entries(8, 8, 1), { term: 1, vote: 'a', commit: 7 });
    await storage.append(entries(9, 9, 2), { term: 2, vote: 'b', commit: 7 });
    t.equal(hardStateWrites(), 3, 'a new term: the hard-state key again');
    await storage.append(entries(8, 9, 3), { term: 3, vote: null, commit: 7 });
    await storage.append(entries(10, 10, 3), { term: 3, vote: null, commit: 9 });
    await storage.close();
    storage = open();
    loaded = await storage.load();
    t.same(
      loaded.hardState,
      { term: 3, vote: null, commit: 9 },
      'after a conflicting suffix was replaced: still the last written',
    );
    t.same(
      loaded.entries.map((e) => [e.index, e.term]),
      [
        [1, 1],
        [2, 1],
        [3, 1],
        [4, 1],
        [5, 1],
        [6, 1],
        [7, 1],
        [8, 3],
        [9, 3],
        [10, 3],
      ],
    );
    await storage.close();
  },
);

t.test(
  'a store in the layout before (hard state and snapshot after the log) loads, and moves on its next writes',
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'raft-legacy-layout-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.open();
    t.teardown(() => db.close());
    const meta = { index: 2, term: 1, time: 1, config: { voters: ['a'], learners: [] } };
    const chunk = (generation: number, n: number): string =>
      `g!sd!${String(generation).padStart(16, '0')}!${String(n).padStart(8, '0')}`;
    // What an older version wrote: keys g!hs, g!sm, g!sd!..., blocks as bare arrays.
    await db.batch([
      { type: 'put', key: 'g!hs', value: encodeValue({ term: 1, vote: 'a', commit: 4 }) },
      { type: 'put', key: 'g!sm', value: encodeValue({ meta, generation: 3, byteLength: 3, chunkCount: 1 }) },
      { type: 'put', key: chunk(3, 0), value: Uint8Array.of(7, 8, 9) },
      { type: 'put', key: 'g!e!0000000000000003', value: encodeValue(entries(3, 4, 1)) },
    ]);
    let storage = new LevelStorage({ db: db as never, prefix: 'g' });
    let loaded = await storage.load();
    t.same(loaded.hardState, { term: 1, vote: 'a', commit: 4 }, 'the hard state under its old key');
    t.same(loaded.snapshot, { meta, data: Uint8Array.of(7, 8, 9) }, 'the snapshot under its old keys');
    t.same(
      loaded.entries.map((e) => e.index),
      [3, 4],
      'the log',
    );

    await storage.append(entries(5, 5, 2), { term: 2, vote: null, commit: 4 });
    t.equal(await db.get('g!hs'), undefined, 'a new term: the old hard-state key is gone');
    t.ok((await db.get('g!!hs')) !== undefined, 'and the new one written');
    await storage.saveSnapshot({ meta: { ...meta, index: 4 }, data: Uint8Array.of(1, 2) });
    t.equal(await db.get('g!sm'), undefined, 'a new snapshot: the old record is gone');
    t.equal(await db.get(chunk(3, 0)), undefined, 'and its chunk');
    await storage.close();
    storage = new LevelStorage({ db: db as never, prefix: 'g' });
    loaded = await storage.load();
    t.same(loaded.hardState, { term: 2, vote: null, commit: 4 });
    t.same(loaded.snapshot?.data, Uint8Array.of(1, 2));
    t.same(
      loaded.entries.map((e) => e.index),
      [5],
    );
    const keys = await db.keys().all();
    t.same(
      keys.filter((k) => !k.startsWith('g!!') && !k.startsWith('g!e!')),
      [],
      'nothing left in the old layout',
    );
    await storage.close();
  },
);
