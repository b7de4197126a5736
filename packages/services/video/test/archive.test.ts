/**
 * The cold storage class on real disk, without processes: the archive container round-trips keys and bytes, refuses
 * a flipped byte, a truncation and a torn header; the store's pack and unpack moves are idempotent across a crash
 * between their steps (simulated by re-running a step on the state a crash would leave).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import t from 'tap';
import { ArchiveCorruptError, readArchive, writeArchive } from '../src/workers/store/archive.js';
import { DiskStore } from '../src/workers/store/disk.js';

const dir = mkdtempSync(join(tmpdir(), 'video-archive-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.test('the container: round trip, then a corrupted byte, a truncation and a bad header are refused', async (t) => {
  const files = [Buffer.from('#EXTM3U\n'), randomBytes(70_000), Buffer.alloc(0), randomBytes(1_500_000)];
  const sources = files.map((bytes, i) => {
    const file = join(dir, `src-${i}`);
    writeFileSync(file, bytes);
    return { key: `videos/v1/r1/obj-${i}`, size: bytes.length, sha256: sha(bytes), file };
  });
  const path = join(dir, 'v1.vca');
  const header = await writeArchive(path, dir, 'v1', sources);
  t.same(
    header.entries.map((e) => e.key),
    sources.map((s) => s.key),
  );
  const seen: Array<[string, Buffer]> = [];
  const read = await readArchive(path, async (e, bytes) => void seen.push([e.key, bytes]));
  t.same(read, header, 'the header reads back');
  t.same(
    seen.map(([k]) => k),
    sources.map((s) => s.key),
    'every entry, in order',
  );
  seen.forEach(([, bytes], i) => t.ok(bytes.equals(files[i]!), `entry ${i} byte-identical`));
  t.equal(
    readFileSync(path).length,
    12 + Buffer.byteLength(JSON.stringify(header)) + files.reduce((n, f) => n + f.length, 0),
    'prefix + header + bytes, nothing else',
  );

  const original = readFileSync(path);
  const flipped = Buffer.from(original);
  flipped[flipped.length - 1000] ^= 0x01;
  writeFileSync(path, flipped);
  const restored: string[] = [];
  await t.rejects(
    readArchive(path, async (e) => void restored.push(e.key)),
    ArchiveCorruptError,
    'one flipped bit in the bytes is refused',
  );
  t.same(restored, [], 'and nothing was handed out from it (all verified before any is restored)');
  writeFileSync(path, original);
  truncateSync(path, original.length - 1);
  await t.rejects(readArchive(path), ArchiveCorruptError, 'a truncated archive is refused');
  const badHeader = Buffer.from(original);
  badHeader[14] = 0x7b; // inside the JSON: `{{` is not JSON
  writeFileSync(path, badHeader);
  await t.rejects(readArchive(path), ArchiveCorruptError, 'a torn header is refused');
  t.equal(await readArchive(join(dir, 'none.vca')), null, 'no archive: null');

  // A warm copy that rotted is not archived (its promised sha256 is checked while copying).
  const rotten = [{ ...sources[1]!, sha256: sha(Buffer.from('something else')) }];
  await t.rejects(writeArchive(join(dir, 'rotten.vca'), dir, 'v2', rotten), ArchiveCorruptError);
  t.notOk(existsSync(join(dir, 'rotten.vca')), 'no archive left behind');
});

t.test('the store: pack and unpack are idempotent across a crash between their steps', async (t) => {
  const disk = new DiskStore(join(dir, 'store'));
  await disk.init();
  const objects = new Map<string, Buffer>([
    ['videos/v9/r1/master.m3u8', Buffer.from('#EXTM3U\n')],
    ['videos/v9/r1/144p/seg-00000.m4s', randomBytes(200_000)],
    ['videos/v9/r1/thumbs/thumb-01.jpg', randomBytes(5_000)],
  ]);
  for (const [key, bytes] of objects) await disk.putObject(key, Readable.from([bytes]), 1e9);
  await disk.putObject('videos/v90/r1/master.m3u8', Readable.from([Buffer.from('another video')]), 1e9);

  t.match(await disk.packCold('v9'), { objects: 3, packed: true });
  t.same(await disk.listPrefix('videos/v9/'), [], 'no warm copy left');
  t.equal((await disk.listPrefix('videos/v90/')).length, 1, 'a video whose id shares the prefix is untouched');
  t.ok(existsSync(disk.coldFile('v9')));
  // A crash after the archive's rename, with one warm copy not yet deleted: the re-run keeps the archive and deletes.
  await disk.putObject('videos/v9/r1/master.m3u8', Readable.from([objects.get('videos/v9/r1/master.m3u8')!]), 1e9);
  t.match(await disk.packCold('v9'), { objects: 3, packed: false }, 'the verified archive is reused, not rewritten');
  t.same(await disk.listPrefix('videos/v9/'), []);

  t.match(await disk.unpackCold('v9'), { objects: 3, unpacked: true });
  for (const [key, bytes] of objects) {
    const chunks: Buffer[] = [];
    for await (const c of disk.readObject(key)) chunks.push(c as Buffer);
    t.ok(Buffer.concat(chunks).equals(bytes), `${key} back byte-identical`);
  }
  t.notOk(existsSync(disk.coldFile('v9')), 'the archive is deleted after the restore');
  t.match(
    await disk.unpackCold('v9'),
    { objects: 0, unpacked: false },
    'a second unpack (a crash before the record) has nothing to do',
  );

  // A corrupt archive restores nothing and stays for an operator.
  await disk.packCold('v9');
  const file = disk.coldFile('v9');
  const bytes = readFileSync(file);
  bytes[bytes.length - 10] ^= 0xff;
  writeFileSync(file, bytes);
  await t.rejects(disk.unpackCold('v9'), ArchiveCorruptError);
  t.same(await disk.listPrefix('videos/v9/'), [], 'nothing written from a corrupt archive');
  t.ok(existsSync(file), 'the corrupt archive is kept');
});
