/**
 * Where an object lives: the N object-store workers of its group (README "Object replication"). A group is an upload
 * (its chunks, its tus file, its raw object `raw/<upload_id>`) and then the video made from it (`videos/<video_id>/`
 * and its cold archive), which inherits the upload's placement at finalize. The placement is chosen once, when the
 * upload is created, by rendezvous hashing of the upload id over the store ids, and recorded in the metadata
 * machine with the upload and the video: every tier reads it there, and a store added later moves nothing.
 */
import { createHash } from 'node:crypto';

/** The replica count when `--set object_replicas` is not given. */
const DEFAULT_OBJECT_REPLICAS = 3;

/** The `n` stores with the highest rendezvous weight for `groupId` (highest first): the replicas of its objects. */
export function placeReplicas(groupId: string, storeIds: readonly string[], n: number): string[] {
  return storeIds
    .map((id) => ({ id, w: createHash('sha256').update(`${groupId}\n${id}`).digest('hex') }))
    .sort((a, b) => (a.w < b.w ? 1 : a.w > b.w ? -1 : 0))
    .slice(0, Math.max(1, Math.min(n, storeIds.length)))
    .map((x) => x.id);
}

/** `--set object_replicas=N` (default 3), at most the number of stores; a bad value stops the worker at start. */
export function replicaCount(settings: Record<string, string>, stores: number): number {
  const raw = settings['object_replicas'];
  if (raw === undefined) return Math.min(DEFAULT_OBJECT_REPLICAS, Math.max(1, stores));
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > Math.max(1, stores))
    throw new Error(`--set object_replicas=${raw}: expected an integer from 1 to the store count (${stores})`);
  return n;
}

/** A majority of `n` replicas: the acknowledgements a write waits for (the writer's own copy counted). */
export function majority(n: number): number {
  return Math.floor(n / 2) + 1;
}

/** The group a key belongs to: `upload` for `uploads/<id>/...` and `raw/<id>`, `video` for `videos/<id>/...`. */
export function groupOf(key: string): { kind: 'upload' | 'video'; id: string } | null {
  const parts = key.split('/');
  if (parts.length < 2 || parts[1] === '') return null;
  if (parts[0] === 'uploads' || parts[0] === 'raw') return { kind: 'upload', id: parts[1]! };
  if (parts[0] === 'videos') return { kind: 'video', id: parts[1]! };
  return null;
}

/** A record's placement, or the single store of a cluster from before replication. */
export function storesOf(record: { stores?: string[] | null }): string[] {
  return record.stores ?? ['store1'];
}
