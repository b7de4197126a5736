/**
 * Consumer offsets, durable: one JSON file replaced atomically (write a temporary file, fsync, rename, fsync the
 * directory), so a crash leaves either the old or the new offsets, never a torn file. Commits are serialized.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';

export const CONSUMER_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export class OffsetStore {
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly offsets: Map<string, number>,
  ) {}

  static async open(dir: string): Promise<OffsetStore> {
    await mkdir(dir, { recursive: true });
    let saved: Record<string, number> = {};
    try {
      saved = JSON.parse(await readFile(join(dir, 'offsets.json'), 'utf8')) as Record<string, number>;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    return new OffsetStore(dir, new Map(Object.entries(saved)));
  }

  /** The consumer's committed offset (the next record it wants), or null if it never committed. */
  get(consumer: string): number | null {
    return this.offsets.get(consumer) ?? null;
  }

  all(): Record<string, number> {
    return Object.fromEntries(this.offsets);
  }

  /** Resolves once the new offset is on disk. */
  commit(consumer: string, offset: number): Promise<void> {
    if (!CONSUMER_NAME.test(consumer))
      return Promise.reject(new RangeError(`bad consumer name ${JSON.stringify(consumer)}`));
    if (!Number.isSafeInteger(offset) || offset < 0) return Promise.reject(new RangeError(`bad offset ${offset}`));
    this.offsets.set(consumer, offset);
    const write = this.queue.then(() => this.persist());
    this.queue = write.catch(() => undefined);
    return write;
  }

  private async persist(): Promise<void> {
    const tmp = join(this.dir, 'offsets.json.tmp');
    const file = await open(tmp, 'w');
    try {
      await file.writeFile(JSON.stringify(this.all()));
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, join(this.dir, 'offsets.json'));
    const dir = await open(this.dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
