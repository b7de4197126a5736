/**
 * Where a tier keeps the objects it fetched: a memory LRU bounded in bytes in front of a disk folder bounded in
 * bytes (least recently used evicted first in both). Objects are immutable, so an entry never changes: it is
 * added whole, read, evicted or purged. The disk folder survives a restart: its index is rebuilt from the
 * metadata files at start. Files are written to a temporary name and renamed, so a crash leaves no torn object.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileNameOf } from './keys.js';

export interface CachedObject {
  key: string;
  body: Buffer;
  contentType: string;
  etag: string;
}

interface DiskMeta {
  key: string;
  contentType: string;
  etag: string;
  size: number;
}

interface ObjectStoreLimits {
  memoryBytes: number;
  diskBytes: number;
}

export class ObjectCache {
  /** Map order is recency order: the first entry is the least recently used. */
  private readonly memory = new Map<string, CachedObject>();
  private memoryUsed = 0;
  private readonly disk = new Map<string, DiskMeta>();
  private diskUsed = 0;
  /** Disk writes that failed (the object was kept in memory only). */
  diskWriteFailures = 0;

  constructor(
    private readonly dir: string,
    private readonly limits: ObjectStoreLimits,
  ) {
    mkdirSync(dir, { recursive: true });
    for (const name of readdirSync(dir)) {
      if (name.endsWith('.tmp')) {
        rmSync(join(dir, name), { force: true });
        continue;
      }
      if (!name.endsWith('.json')) continue;
      try {
        const meta = JSON.parse(readFileSync(join(dir, name), 'utf8')) as DiskMeta;
        if (typeof meta.key === 'string' && fileNameOf(meta.key) + '.json' === name) {
          this.disk.set(meta.key, meta);
          this.diskUsed += meta.size;
        }
      } catch {
        // An unreadable metadata file: the object is fetched again when asked for.
        rmSync(join(dir, name), { force: true });
      }
    }
    this.evictDisk();
  }

  /** The object, from memory or disk (a disk hit is promoted to memory), or undefined. */
  get(key: string): CachedObject | undefined {
    const hot = this.memory.get(key);
    if (hot !== undefined) {
      this.memory.delete(key);
      this.memory.set(key, hot);
      return hot;
    }
    const meta = this.disk.get(key);
    if (meta === undefined) return undefined;
    let body: Buffer;
    try {
      body = readFileSync(this.path(key, 'bin'));
    } catch {
      this.dropDisk(key);
      return undefined;
    }
    if (body.length !== meta.size) {
      this.dropDisk(key);
      return undefined;
    }
    this.disk.delete(key);
    this.disk.set(key, meta);
    const object = { key, body, contentType: meta.contentType, etag: meta.etag };
    this.remember(object);
    return object;
  }

  has(key: string): boolean {
    return this.memory.has(key) || this.disk.has(key);
  }

  put(object: CachedObject): void {
    this.remember(object);
    if (object.body.length > this.limits.diskBytes) return;
    if (this.disk.has(object.key)) return;
    const meta: DiskMeta = {
      key: object.key,
      contentType: object.contentType,
      etag: object.etag,
      size: object.body.length,
    };
    const bin = this.path(object.key, 'bin');
    const json = this.path(object.key, 'json');
    try {
      writeFileSync(bin + '.tmp', object.body);
      renameSync(bin + '.tmp', bin);
      // The metadata file is written last: it is what makes the object exist after a restart.
      writeFileSync(json + '.tmp', JSON.stringify(meta));
      renameSync(json + '.tmp', json);
    } catch {
      // A full or failing disk costs the disk copy only: the object is in memory and is served.
      for (const f of [bin, json, bin + '.tmp', json + '.tmp']) {
        try {
          rmSync(f, { force: true });
        } catch {
          // the folder itself is unusable: nothing to clean
        }
      }
      this.diskWriteFailures++;
      return;
    }
    this.disk.set(object.key, meta);
    this.diskUsed += meta.size;
    this.evictDisk();
  }

  /** Drops every object whose key starts with `prefix`; returns the keys dropped. */
  purge(prefix: string): string[] {
    const dropped = new Set<string>();
    for (const [key, object] of this.memory) {
      if (!key.startsWith(prefix)) continue;
      this.memory.delete(key);
      this.memoryUsed -= object.body.length;
      dropped.add(key);
    }
    for (const key of [...this.disk.keys()]) {
      if (!key.startsWith(prefix)) continue;
      this.dropDisk(key);
      dropped.add(key);
    }
    return [...dropped];
  }

  stats(): {
    memoryObjects: number;
    memoryBytes: number;
    diskObjects: number;
    diskBytes: number;
    diskWriteFailures: number;
  } {
    return {
      memoryObjects: this.memory.size,
      memoryBytes: this.memoryUsed,
      diskObjects: this.disk.size,
      diskBytes: this.diskUsed,
      diskWriteFailures: this.diskWriteFailures,
    };
  }

  private remember(object: CachedObject): void {
    if (object.body.length > this.limits.memoryBytes) return;
    const old = this.memory.get(object.key);
    if (old !== undefined) {
      this.memory.delete(object.key);
      this.memoryUsed -= old.body.length;
    }
    this.memory.set(object.key, object);
    this.memoryUsed += object.body.length;
    for (const [key, victim] of this.memory) {
      if (this.memoryUsed <= this.limits.memoryBytes) break;
      this.memory.delete(key);
      this.memoryUsed -= victim.body.length;
    }
  }

  private evictDisk(): void {
    for (const key of this.disk.keys()) {
      if (this.diskUsed <= this.limits.diskBytes) break;
      this.dropDisk(key);
    }
  }

  private dropDisk(key: string): void {
    const meta = this.disk.get(key);
    if (meta === undefined) return;
    this.disk.delete(key);
    this.diskUsed -= meta.size;
    rmSync(this.path(key, 'json'), { force: true });
    rmSync(this.path(key, 'bin'), { force: true });
  }

  private path(key: string, ext: 'bin' | 'json'): string {
    return join(this.dir, `${fileNameOf(key)}.${ext}`);
  }
}
