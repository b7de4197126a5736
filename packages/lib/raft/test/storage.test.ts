/**
 * One contract for both Storage implementations, plus LevelDB-only checks (durability across reopen, shared
 * databases, chunked snapshots, synced batches) and a fast-check model comparison.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Level } from 'level';
import t from 'tap';
import { encodeValue } from '../src/codec/msgpack.js';
import { LevelStorage } from '../src/storage/leveldb.js';
import { MemoryStorage } from '../src/storage/memory.js';
import type { Entry, HardState, Snapshot, Storage } from '../src/types.js';

// ---------------------------------------------------------------------------------------------------------
// Fixtures

const CONFIG = { voters: ['n1', 'n2', 'n3'], learners: [] };

function command(index: number, term: number): Entry {
  return { index, term, time: 1000 + index, kind: 'command', data: Uint8Array.of(index % 256, term % 256, 7) };
}

/** Entries first..last, all in `term`, cycling through the three entry kinds. */
function entries(first: number, last: number, term: number): Entry[] {
  const result: Entry[] = [];
  for (let index = first; index <= last; index++) {
    if (index % 5 === 0) result.push({ index, term, time: index, kind: 'noop' });
    else if (index % 7 === 0) {
      result.push({
        index,
        term,
        time: index,
        kind: 'config',
        change: { type: 'addLearner', node: `n${index}` },
        config: { voters: ['n1'], learners: [`n${index}`] },
      });
    } else result.push(command(index, term));
  }
  return result;
}

function snapshot(index: number, term: number, bytes = 16): Snapshot {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 31 + index) % 256;
  return { meta: { index, term, time: 5000 + index, config: CONFIG }, data };
}

function indexes(log: Entry[]): number[] {
  return log.map((entry) => entry.index);
}

/** A storage under test plus a way to get a second instance over the same data, as after a restart. */
interface Subject {
  storage: Storage;
  /** Closes `storage` and opens the same data again (MemoryStorage: the same instance). */
  reopen(): Promise<Storage>;
}

interface Implementation {
  name: string;
  create(t: Teardown): Promise<Subject>;
}

/** The part of a tap test the fixtures need: somewhere to register cleanup. */
interface Teardown {
  teardown(fn: () => unknown): void;
}

async function tempDir(t: Teardown): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'raft-storage-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const implementations: Implementation[] = [
  {
    name: 'MemoryStorage',
    async create() {
      const storage = new MemoryStorage();
      return { storage, reopen: async () => storage };
    },
  },
  {
    name: 'LevelStorage',
    async create(t) {
      const dir = await tempDir(t);
      // Small chunks so that snapshots in these tests span several keys.
      const open = () => new LevelStorage(dir, { snapshotChunkBytes: 10 });
      const subject: Subject = {
        storage: open(),
        async reopen() {
          await subject.storage.close();
          subject.storage = open();
          return subject.storage;
        },
      };
      t.teardown(() => subject.storage.close());
      return subject;
    },
  },
];

// ---------------------------------------------------------------------------------------------------------
// The contract

for (const impl of implementations) {
  t.test(`${impl.name} contract`, async (t) => {
    t.test('a fresh storage is empty', async (t) => {
      const { storage } = await impl.create(t);
      t.same(await storage.load(), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
      t.equal(await storage.latestSnapshot(), null);
    });

    t.test('append stores entries and hard state, and both survive a reopen', async (t) => {
      const subject = await impl.create(t);
      const hardState: HardState = { term: 2, vote: 'n2', commit: 3 };
      await subject.storage.append(entries(1, 10, 2), hardState);
      await subject.storage.append([], { term: 3, vote: null, commit: 4 });
      await subject.storage.append([], null);
      const storage = await subject.reopen();
      const loaded = await storage.load();
      t.same(loaded.hardState, { term: 3, vote: null, commit: 4 });
      t.same(loaded.entries, entries(1, 10, 2));
      const first = loaded.entries[0]!;
      t.ok(
        first.kind === 'command' && Object.getPrototypeOf(first.data) === Uint8Array.prototype,
        'data is a Uint8Array',
      );
    });

    t.test('append truncates the conflicting suffix', async (t) => {
      const subject = await impl.create(t);
      await subject.storage.append(entries(1, 8, 1), null);
      await subject.storage.append(entries(4, 5, 2), null);
      let loaded = await subject.storage.load();
      t.same(loaded.entries, [...entries(1, 3, 1), ...entries(4, 5, 2)]);
      // The last index is known after reopening too: truncating again removes only what is stored.
      const storage = await subject.reopen();
      await storage.append(entries(3, 3, 3), null);
      loaded = await storage.load();
      t.same(loaded.entries, [...entries(1, 2, 1), ...entries(3, 3, 3)]);
      await storage.append(entries(4, 6, 3), null);
      t.same(indexes((await (await subject.reopen()).load()).entries), [1, 2, 3, 4, 5, 6]);
    });

    t.test('append refuses gaps and non-contiguous batches without writing anything', async (t) => {
      const { storage } = await impl.create(t);
      await t.rejects(storage.append(entries(2, 3, 1), null), { name: 'RangeError' }, 'log must start at 1');
      await storage.append(entries(1, 3, 1), null);
      await t.rejects(storage.append(entries(5, 6, 1), { term: 9, vote: null, commit: 0 }), { name: 'RangeError' });
      await t.rejects(storage.append([command(4, 1), command(6, 1)], null), { name: 'RangeError' });
      const loaded = await storage.load();
      t.same(indexes(loaded.entries), [1, 2, 3]);
      t.equal(loaded.hardState.term, 0, 'the hard state of a refused batch is not stored');
    });

    t.test('a snapshot that matches the log keeps the entries after it', async (t) => {
      const subject = await impl.create(t);
      await subject.storage.append(entries(1, 10, 1), null);
      const snap = snapshot(6, 1, 45);
      await subject.storage.saveSnapshot(snap);
      for (const reopen of [false, true]) {
        const storage = reopen ? await subject.reopen() : subject.storage;
        const loaded = await storage.load();
        t.same(loaded.snapshot, snap);
        t.ok(Object.getPrototypeOf(loaded.snapshot!.data) === Uint8Array.prototype, 'snapshot data is a Uint8Array');
        t.same(loaded.entries, entries(7, 10, 1));
        t.same(await storage.latestSnapshot(), snap);
      }
    });

    t.test('a snapshot that conflicts with the log, or is beyond it, replaces the whole log', async (t) => {
      const subject = await impl.create(t);
      await subject.storage.append(entries(1, 10, 1), null);
      await subject.storage.saveSnapshot(snapshot(7, 2));
      t.same((await subject.storage.load()).entries, []);
      await subject.storage.append(entries(8, 9, 2), null);
      await subject.storage.saveSnapshot(snapshot(20, 3));
      const storage = await subject.reopen();
      t.same((await storage.load()).entries, []);
      await t.rejects(storage.append(entries(22, 22, 3), null), { name: 'RangeError' });
      await storage.append(entries(21, 22, 3), null);
      t.same(indexes((await storage.load()).entries), [21, 22]);
    });

    t.test('entries already covered by the snapshot are skipped on append', async (t) => {
      const { storage } = await impl.create(t);
      await storage.append(entries(1, 5, 1), null);
      await storage.saveSnapshot(snapshot(5, 1));
      await storage.append(entries(3, 7, 1), null);
      t.same(indexes((await storage.load()).entries), [6, 7]);
    });

    t.test('a stale snapshot is ignored; a snapshot at the same point replaces the data', async (t) => {
      const subject = await impl.create(t);
      await subject.storage.append(entries(1, 10, 1), null);
      await subject.storage.saveSnapshot(snapshot(8, 1, 30));
      await subject.storage.saveSnapshot(snapshot(4, 1, 30));
      t.equal((await subject.storage.latestSnapshot())!.meta.index, 8);
      const replacement = snapshot(8, 1, 3);
      await subject.storage.saveSnapshot(replacement);
      const storage = await subject.reopen();
      const loaded = await storage.load();
      t.same(loaded.snapshot, replacement);
      t.same(indexes(loaded.entries), [9, 10]);
    });

    t.test('an empty snapshot round-trips', async (t) => {
      const subject = await impl.create(t);
      await subject.storage.saveSnapshot(snapshot(3, 1, 0));
      const loaded = await (await subject.reopen()).load();
      t.same(loaded.snapshot, snapshot(3, 1, 0));
    });

    t.test('compact accepts indexes covered by the snapshot and refuses the rest', async (t) => {
      const { storage } = await impl.create(t);
      await storage.append(entries(1, 10, 1), null);
      await t.rejects(storage.compact(1), { name: 'RangeError' });
      await storage.saveSnapshot(snapshot(6, 1));
      await storage.compact(6);
      await storage.compact(2);
      await t.rejects(storage.compact(7), { name: 'RangeError' });
      t.same(indexes((await storage.load()).entries), [7, 8, 9, 10]);
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// LevelDB only

/** A database shared by several storages, with every batch's options recorded. */
async function sharedDb(t: Teardown): Promise<{ db: Level; batchOptions: unknown[] }> {
  const db = new Level(await tempDir(t));
  await db.open();
  t.teardown(() => db.close());
  const batchOptions: unknown[] = [];
  const batch = db.batch.bind(db) as (ops: unknown, options?: unknown) => Promise<void>;
  (db as unknown as { batch: typeof batch }).batch = (ops, options) => {
    batchOptions.push(options);
    return batch(ops, options);
  };
  return { db, batchOptions };
}

async function countKeys(db: Level, prefix: string): Promise<number> {
  return (await db.keys({ gte: prefix, lt: `${prefix}\uffff` }).all()).length;
}

t.test('LevelStorage: groups sharing one database are independent', async (t) => {
  const { db, batchOptions } = await sharedDb(t);
  const a = new LevelStorage({ db, prefix: 'g1' });
  const b = new LevelStorage({ db, prefix: 'g10' });
  await a.append(entries(1, 5, 1), { term: 1, vote: 'n1', commit: 2 });
  await b.append(entries(1, 3, 4), { term: 4, vote: 'n3', commit: 1 });
  await a.saveSnapshot(snapshot(4, 1));
  await b.append(entries(2, 2, 5), null);

  t.same(await a.load(), {
    hardState: { term: 1, vote: 'n1', commit: 2 },
    snapshot: snapshot(4, 1),
    entries: entries(5, 5, 1),
  });
  t.same(await b.load(), {
    hardState: { term: 4, vote: 'n3', commit: 1 },
    snapshot: null,
    entries: [...entries(1, 1, 4), ...entries(2, 2, 5)],
  });

  // A sublevel works as the shared database too.
  const c = new LevelStorage({ db: db.sublevel('groups'), prefix: 'g1' });
  await c.append(entries(1, 1, 9), null);
  t.same((await c.load()).entries, entries(1, 1, 9));
  t.equal((await a.load()).entries.length, 1, 'the sublevel group does not see g1 outside it');
  await c.close();

  // Closing a storage on a shared database leaves the database open for the others.
  await a.close();
  await t.rejects(a.load(), /closed/);
  t.equal((await b.load()).entries.length, 2);
  await b.close();
  t.equal(db.status, 'open');

  t.ok(batchOptions.length > 0);
  t.ok(
    batchOptions.every((options) => (options as { sync?: boolean }).sync === true),
    'every batch is synced',
  );
  t.throws(() => new LevelStorage({ db, prefix: 'a!b' }), TypeError);
  t.throws(() => new LevelStorage({ db, prefix: '' }), TypeError);
});

t.test('LevelStorage: snapshots are stored in chunks and old chunks are removed', async (t) => {
  const { db } = await sharedDb(t);
  const storage = new LevelStorage({ db, prefix: 'g' }, { snapshotChunkBytes: 1024 });
  const big = snapshot(10, 2, 10 * 1024 + 1);
  await storage.saveSnapshot(big);
  t.equal(await countKeys(db, 'g!!sd!'), 11);
  t.same(await storage.latestSnapshot(), big);
  const small = snapshot(12, 2, 100);
  await storage.saveSnapshot(small);
  t.equal(await countKeys(db, 'g!!sd!'), 1);
  t.same(await storage.latestSnapshot(), small);
  await storage.close();
});

t.test('LevelStorage: chunks of an interrupted snapshot save are cleared on open', async (t) => {
  const { db } = await sharedDb(t);
  const storage = new LevelStorage({ db, prefix: 'g' }, { snapshotChunkBytes: 4 });
  await storage.saveSnapshot(snapshot(3, 1, 10));
  await storage.close();
  // What a crash after writing a newer generation's chunks, before switching to it, leaves behind.
  await db.put('g!!sd!0000000000000002!00000000', 'orphan');
  await db.put('g!!sd!0000000000000000!00000000', 'orphan');
  await db.put('g!sd!0000000000000005!00000000', 'orphan of the layout before');
  const reopened = new LevelStorage({ db, prefix: 'g' }, { snapshotChunkBytes: 4 });
  t.same((await reopened.load()).snapshot, snapshot(3, 1, 10));
  t.equal(await countKeys(db, 'g!!sd!'), 3);
  t.equal(await countKeys(db, 'g!sd!'), 0, 'and of the layout before');
  await reopened.close();
});

t.test('LevelStorage: concurrent calls apply in call order', async (t) => {
  const { db } = await sharedDb(t);
  const storage = new LevelStorage({ db, prefix: 'g' });
  const writes = [
    storage.append(entries(1, 5, 1), null),
    storage.append(entries(3, 4, 2), { term: 2, vote: null, commit: 0 }),
    storage.append(entries(5, 5, 2), null),
  ];
  const loaded = storage.load();
  await Promise.all(writes);
  t.same((await loaded).entries, [...entries(1, 2, 1), ...entries(3, 5, 2)]);
  // A snapshot and the appends after it: whichever finishes first, the result is the same.
  await Promise.all([storage.saveSnapshot(snapshot(2, 1)), storage.append(entries(6, 6, 2), null)]);
  const after = await storage.load();
  t.same(after.entries, [...entries(3, 6, 2)]);
  t.equal(after.snapshot?.meta.index, 2);
  await storage.close();
});

t.test('LevelStorage: appends made while a large snapshot is written do not wait for it', async (t) => {
  const storage = new LevelStorage(await tempDir(t));
  t.teardown(() => storage.close());
  await storage.append(entries(1, 10, 1), null);
  let saved = false;
  // 24 MiB: twelve synced batches of chunks, written beside the appends.
  const saving = storage.saveSnapshot(snapshot(8, 1, 24 * 1024 * 1024)).then(() => (saved = true));
  await storage.append(entries(11, 11, 1), null);
  t.equal(saved, false, 'the append completed while the snapshot was still being written');
  await saving;
  const loaded = await storage.load();
  t.equal(loaded.snapshot?.meta.index, 8);
  t.same(loaded.snapshot?.data, snapshot(8, 1, 24 * 1024 * 1024).data, 'every chunk stored');
  t.same(indexes(loaded.entries), [9, 10, 11], 'the append landed, the covered entries went');
});

t.test('LevelStorage: close waits for a snapshot save begun before it, chunks and record', async (t) => {
  const dir = await tempDir(t);
  const storage = new LevelStorage(dir);
  await storage.append(entries(1, 10, 1), null);
  const big = snapshot(6, 1, 12 * 1024 * 1024);
  const saving = storage.saveSnapshot(big);
  await storage.close();
  await saving; // resolved, not rejected with "closed"
  await t.rejects(storage.saveSnapshot(snapshot(7, 1)), /closed/, 'a save after close is refused');
  const reopened = new LevelStorage(dir);
  t.teardown(() => reopened.close());
  const loaded = await reopened.load();
  t.equal(loaded.snapshot?.meta.index, 6);
  t.same(loaded.snapshot?.data, big.data);
  t.same(indexes(loaded.entries), [7, 8, 9, 10]);
});

t.test(
  'LevelStorage: a snapshot overtaken by a newer one while its chunks were written is dropped; the newer one stays, on disk too',
  async (t) => {
    const dir = await tempDir(t);
    const storage = new LevelStorage(dir);
    await storage.append(entries(1, 20, 1), null);
    const older = storage.saveSnapshot(snapshot(5, 1, 8 * 1024 * 1024));
    const newer = storage.saveSnapshot(snapshot(15, 1, 64));
    await Promise.all([older, newer]);
    t.equal((await storage.latestSnapshot())?.meta.index, 15, 'the newer one stays');
    await storage.close();
    const reopened = new LevelStorage(dir);
    t.teardown(() => reopened.close());
    const loaded = await reopened.load();
    t.equal(loaded.snapshot?.meta.index, 15);
    t.same(loaded.snapshot?.data, snapshot(15, 1, 64).data);
    t.same(indexes(loaded.entries), [16, 17, 18, 19, 20]);
  },
);

// ---------------------------------------------------------------------------------------------------------
// Model-based property: random operation sequences against a deliberately naive model.

type Operation =
  | { op: 'append'; first: number; count: number; term: number; hardState: HardState | null }
  | { op: 'snapshot'; index: number; term: number; bytes: number }
  | { op: 'compact'; back: number }
  | { op: 'reopen' };

/** Offsets are relative to the model's last index so most operations are valid and some are not. */
const operation: fc.Arbitrary<Operation> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('append' as const),
      first: fc.integer({ min: -6, max: 2 }),
      count: fc.integer({ min: 0, max: 4 }),
      term: fc.integer({ min: 1, max: 4 }),
      hardState: fc.option(
        fc.record({ term: fc.nat(9), vote: fc.option(fc.constantFrom('n1', 'n2')), commit: fc.nat(20) }),
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('snapshot' as const),
      index: fc.integer({ min: -6, max: 3 }),
      term: fc.integer({ min: 1, max: 4 }),
      bytes: fc.nat(40),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('compact' as const), back: fc.integer({ min: -1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.constant({ op: 'reopen' as const }) },
);

/** The simplest possible storage: a map from index to entry and the current snapshot. */
class StorageModel {
  hardState: HardState = { term: 0, vote: null, commit: 0 };
  snapshot: Snapshot | null = null;
  log = new Map<number, Entry>();

  get snapshotIndex(): number {
    return this.snapshot?.meta.index ?? 0;
  }

  get lastIndex(): number {
    return Math.max(this.snapshotIndex, ...this.log.keys());
  }

  /** Returns false when the storage must refuse the batch. */
  append(batch: Entry[], hardState: HardState | null): boolean {
    if (batch.length > 0 && batch[0]!.index > this.lastIndex + 1) return false;
    const kept = batch.filter((entry) => entry.index > this.snapshotIndex);
    if (kept.length > 0) {
      for (const index of [...this.log.keys()]) if (index >= kept[0]!.index) this.log.delete(index);
      for (const entry of kept) this.log.set(entry.index, entry);
    }
    if (hardState !== null) this.hardState = hardState;
    return true;
  }

  saveSnapshot(snap: Snapshot): void {
    if (snap.meta.index < this.snapshotIndex) return;
    const termThere =
      snap.meta.index === this.snapshotIndex ? this.snapshot?.meta.term : this.log.get(snap.meta.index)?.term;
    if (termThere !== snap.meta.term) this.log.clear();
    for (const index of [...this.log.keys()]) if (index <= snap.meta.index) this.log.delete(index);
    this.snapshot = snap;
  }

  entries(): Entry[] {
    return [...this.log.values()].sort((a, b) => a.index - b.index);
  }
}

async function checkAgainstModel(subject: Subject, operations: Operation[], model = new StorageModel()): Promise<void> {
  let storage = subject.storage;
  for (const step of operations) {
    switch (step.op) {
      case 'append': {
        const first = Math.max(1, model.lastIndex + step.first);
        const batch = step.count === 0 ? [] : entries(first, first + step.count - 1, step.term);
        const accepted = model.append(batch, step.hardState);
        const outcome = await storage.append(batch, step.hardState).then(
          () => true,
          () => false,
        );
        if (outcome !== accepted)
          throw new Error(`append ${first}+${step.count}: storage ${outcome}, model ${accepted}`);
        break;
      }
      case 'snapshot': {
        const snap = snapshot(Math.max(0, model.lastIndex + step.index), step.term, step.bytes);
        model.saveSnapshot(snap);
        await storage.saveSnapshot(snap);
        break;
      }
      case 'compact': {
        const upTo = model.snapshotIndex - step.back;
        const allowed = upTo <= model.snapshotIndex;
        const outcome = await storage.compact(upTo).then(
          () => true,
          () => false,
        );
        if (outcome !== allowed) throw new Error(`compact ${upTo}: storage ${outcome}, model ${allowed}`);
        break;
      }
      case 'reopen':
        storage = await subject.reopen();
        break;
    }
    const loaded = await storage.load();
    const expected = { hardState: model.hardState, snapshot: model.snapshot, entries: model.entries() };
    // Compare as JSON with byte arrays as number lists. A Buffer would serialise through Buffer.toJSON instead,
    // so a Buffer coming back where a plain Uint8Array belongs fails the comparison too.
    const plain = (value: unknown) => JSON.stringify(value, (_key, v) => (v instanceof Uint8Array ? [...v] : v));
    if (plain(loaded) !== plain(expected)) {
      throw new Error(`after ${JSON.stringify(step)}:\n  storage ${plain(loaded)}\n  model   ${plain(expected)}`);
    }
  }
}

t.test('MemoryStorage matches the model', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(operation, { maxLength: 25 }), async (operations) => {
      const storage = new MemoryStorage();
      await checkAgainstModel({ storage, reopen: async () => storage }, operations);
    }),
    { numRuns: 200 },
  );
  t.pass('200 random operation sequences agree with the model');
});

t.test('LevelStorage matches the model, across reopens', async (t) => {
  const { db } = await sharedDb(t);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(operation, { maxLength: 20 }), async (operations) => {
      // A fresh prefix per run: one database, many independent groups.
      const prefix = `run${run++}`;
      const open = () => new LevelStorage({ db, prefix }, { snapshotChunkBytes: 8 });
      const subject: Subject = {
        storage: open(),
        async reopen() {
          await subject.storage.close();
          subject.storage = open();
          return subject.storage;
        },
      };
      try {
        await checkAgainstModel(subject, operations);
      } finally {
        await subject.storage.close();
      }
    }),
    { numRuns: 40 },
  );
  t.pass('40 random operation sequences agree with the model');
});

// ---------------------------------------------------------------------------------------------------------
// Databases written before entries were stored in blocks: one key per entry, its value the entry's own map.

/** Writes `log` and `hardState` exactly as LevelStorage did before blocks (keys.ts layout, one value per entry). */
async function writeLegacyLog(db: Level, prefix: string, log: Entry[], hardState: HardState): Promise<void> {
  const encodings = { keyEncoding: 'utf8', valueEncoding: 'view' } as const;
  const ops = log.map((entry) => ({
    type: 'put' as const,
    key: `${prefix}!e!${String(entry.index).padStart(16, '0')}`,
    value: encodeValue(entry),
  }));
  ops.push({ type: 'put', key: `${prefix}!hs`, value: encodeValue(hardState) });
  await db.batch(ops, { ...encodings, sync: true });
}

t.test('LevelStorage loads a log written one entry per key, and keeps working on it', async (t) => {
  const { db } = await sharedDb(t);
  const hardState = { term: 3, vote: 'n2', commit: 4 };
  await writeLegacyLog(db, 'old', entries(1, 9, 2), hardState);
  const storage = new LevelStorage({ db, prefix: 'old' });
  t.same(await storage.load(), { hardState, snapshot: null, entries: entries(1, 9, 2) });
  // Truncate into the legacy entries, snapshot across both layouts, reopen.
  await storage.append(entries(6, 7, 3), null);
  await storage.append(entries(8, 12, 3), null);
  t.same((await storage.load()).entries, [...entries(1, 5, 2), ...entries(6, 12, 3)]);
  await storage.saveSnapshot(snapshot(7, 3));
  await storage.close();
  const reopened = new LevelStorage({ db, prefix: 'old' });
  t.same(await reopened.load(), { hardState, snapshot: snapshot(7, 3), entries: entries(8, 12, 3) });
  t.equal(await countKeys(db, 'old!e!'), 1, 'only the block holding 8..12 is left');
  await reopened.close();
});

t.test('LevelStorage matches the model from a log written one entry per key', async (t) => {
  const { db } = await sharedDb(t);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.nat(8), fc.array(operation, { maxLength: 20 }), async (legacyLength, operations) => {
      const prefix = `legacy${run++}`;
      const model = new StorageModel();
      const hardState = { term: 1, vote: 'n1', commit: 0 };
      const legacy = legacyLength === 0 ? [] : entries(1, legacyLength, 1);
      model.append(legacy, hardState);
      await writeLegacyLog(db, prefix, legacy, hardState);
      const open = () => new LevelStorage({ db, prefix }, { snapshotChunkBytes: 8 });
      const subject: Subject = {
        storage: open(),
        async reopen() {
          await subject.storage.close();
          subject.storage = open();
          return subject.storage;
        },
      };
      try {
        await checkAgainstModel(subject, [{ op: 'reopen' }, ...operations], model);
      } finally {
        await subject.storage.close();
      }
    }),
    { numRuns: 60 },
  );
  t.pass('60 random operation sequences on a legacy log agree with the model');
});
