import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { OffsetStore, StreamLog } from '../src/index.js';

const payload = (i: number) => Buffer.from(`record-${i}-${'x'.repeat(i % 17)}`);
const texts = (records: Uint8Array[]) => records.map((r) => Buffer.from(r).toString());

/** A fresh directory, removed when the whole file's tests end. */
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'stream-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function appendAll(log: StreamLog, n: number, from = 0): Promise<number[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => log.append([payload(from + i)])));
}

t.test('appends get consecutive offsets, concurrent appends share a commit, and all survive reopen', async (t) => {
  const dir = tempDir();
  const log = await StreamLog.open({ dir });
  t.equal(log.endOffset, 0);
  const offsets = await appendAll(log, 300);
  t.same(
    offsets,
    Array.from({ length: 300 }, (_, i) => i),
    'one offset per record, in call order',
  );
  t.equal(await log.append([payload(300), payload(301)]), 300, 'a multi-record append returns its first offset');
  const read = await log.read(0, 1000);
  t.equal(read.records.length, 302);
  t.same(
    texts(read.records),
    Array.from({ length: 302 }, (_, i) => payload(i).toString()),
  );
  await log.close();
  const again = await StreamLog.open({ dir });
  t.equal(again.truncatedBytes, 0);
  t.equal(again.endOffset, 302);
  t.same(
    texts((await again.read(150, 3)).records),
    [150, 151, 152].map((i) => payload(i).toString()),
  );
  t.equal(await again.append([payload(302)]), 302, 'appends continue after the last record');
  await again.close();
  await t.rejects(again.append([payload(0)]), /closed/);
});

t.test('a torn tail (partial record after a crash) is truncated on open; earlier records are intact', async (t) => {
  const dir = tempDir();
  const log = await StreamLog.open({ dir });
  await appendAll(log, 10);
  await log.close();
  const [segment] = readdirSync(dir);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(100, 0);
  appendFileSync(join(dir, segment!), Buffer.concat([header, Buffer.from('only part of it')]));
  const reopened = await StreamLog.open({ dir });
  t.equal(reopened.truncatedBytes, 8 + 15, 'the partial record is cut');
  t.equal(reopened.endOffset, 10);
  t.equal(await reopened.append([Buffer.from('after')]), 10);
  const all = await reopened.read(0, 100);
  t.same(texts(all.records).slice(9), [payload(9).toString(), 'after']);
  await reopened.close();
});

t.test('a record whose checksum fails ends the valid log at that record', async (t) => {
  const dir = tempDir();
  const log = await StreamLog.open({ dir });
  await appendAll(log, 5);
  await log.close();
  const path = join(dir, readdirSync(dir)[0]!);
  const bytes = readFileSync(path);
  bytes[bytes.length - 1] ^= 0xff; // flip a byte of the last record's payload
  writeFileSync(path, bytes);
  const reopened = await StreamLog.open({ dir });
  t.equal(reopened.endOffset, 4, 'the corrupt last record is gone');
  t.equal(reopened.truncatedBytes, 8 + payload(4).length);
  t.same(
    texts((await reopened.read(0, 10)).records),
    [0, 1, 2, 3].map((i) => payload(i).toString()),
  );
  await reopened.close();
});

t.test('segments roll by size; reads cross segments from any offset, before and after reopen', async (t) => {
  const dir = tempDir();
  const log = await StreamLog.open({ dir, segmentBytes: 2_000 });
  await appendAll(log, 1_000);
  t.ok(log.segmentCount > 5, `rolled into ${log.segmentCount} segments`);
  t.equal(readdirSync(dir).length, log.segmentCount);
  const check = async (l: StreamLog, label: string) => {
    for (const from of [0, 1, 37, 255, 256, 257, 511, 600, 998, 999]) {
      const { offset, records } = await l.read(from, 5);
      t.equal(offset, from, `${label}: read at ${from} starts there`);
      t.equal(texts(records)[0], payload(from).toString(), `${label}: first record at ${from}`);
    }
    let next = 0;
    const seen: string[] = [];
    while (next < 1_000) {
      const { records } = await l.read(next, 64);
      seen.push(...texts(records));
      next += records.length;
    }
    t.same(
      seen,
      Array.from({ length: 1_000 }, (_, i) => payload(i).toString()),
      `${label}: sequential reads see every record once, in order`,
    );
    t.same((await l.read(1_000, 10)).records, [], `${label}: nothing past the end`);
  };
  await check(log, 'live');
  await log.close();
  const reopened = await StreamLog.open({ dir, segmentBytes: 2_000 });
  await check(reopened, 'reopened');
  await reopened.close();
});

t.test('maxBytes bounds a read but always returns at least one record', async (t) => {
  const dir = tempDir();
  const log = await StreamLog.open({ dir });
  await log.append([Buffer.alloc(1000, 1), Buffer.alloc(1000, 2), Buffer.alloc(1000, 3)]);
  t.equal((await log.read(0, 10, 1500)).records.length, 1);
  t.equal((await log.read(0, 10, 2000)).records.length, 2);
  t.equal((await log.read(0, 10, 10)).records.length, 1);
  await t.rejects(log.append([Buffer.alloc(2 << 20)]), RangeError, 'an oversized record is refused');
  t.equal(log.endOffset, 3);
  await log.close();
});

t.test(
  'retention deletes the oldest whole segments; a read below the start begins at the oldest kept record',
  async (t) => {
    const dir = tempDir();
    const log = await StreamLog.open({ dir, segmentBytes: 1_000, retainSegments: 3 });
    await appendAll(log, 500);
    t.equal(log.segmentCount, 3);
    t.equal(readdirSync(dir).length, 3);
    t.ok(log.startOffset > 0);
    const { offset, records } = await log.read(0, 1);
    t.equal(offset, log.startOffset);
    t.equal(texts(records)[0], payload(log.startOffset).toString());
    await log.close();
    const reopened = await StreamLog.open({ dir, segmentBytes: 1_000, retainSegments: 3 });
    t.equal(reopened.startOffset, offset, 'the start survives reopen');
    t.equal(reopened.endOffset, 500);
    await reopened.close();

    const byBytes = await StreamLog.open({ dir: tempDir(), segmentBytes: 1_000, retainBytes: 2_500 });
    await appendAll(byBytes, 500);
    t.ok(byBytes.sizeBytes <= 2_500 + 1_000, `size ${byBytes.sizeBytes} kept near the byte limit`);
    t.ok(byBytes.startOffset > 0);
    await byBytes.close();
  },
);

t.test('consumer offsets are durable across reopen', async (t) => {
  const dir = tempDir();
  const offsets = await OffsetStore.open(dir);
  t.equal(offsets.get('analytics'), null);
  await Promise.all([offsets.commit('analytics', 10), offsets.commit('feeds', 3)]);
  await offsets.commit('analytics', 42);
  await t.rejects(offsets.commit('bad name!', 1), RangeError);
  await t.rejects(offsets.commit('analytics', -1), RangeError);
  const reopened = await OffsetStore.open(dir);
  t.same(reopened.all(), { analytics: 42, feeds: 3 });
});
