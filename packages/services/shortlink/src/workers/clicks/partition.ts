/**
 * The click path's partitions: a click goes to the partition of its short code in the click topic (click-log.ts),
 * and each analytics worker owns a fixed share of the partitions, so all of one link's clicks are counted by one
 * worker (its aggregates are in one place, its stats one read) and the partitions are consumed in parallel.
 *
 * Analytics worker analytics<i> (1-based, of A) owns the partitions p with p mod A = i - 1. The layout is fixed by
 * the cluster's settings and worker counts at creation (`click_partitions`, `--workers analytics=A`): changing
 * either for an existing cluster would send a link's clicks to another partition or owner (a replay with the new
 * layout is then needed).
 */
import type { PeerAddress } from '@raftkit/http';

/** FNV-1a (32 bits) of the code, modulo the partition count: cheap, stable across processes and releases. */
export function partitionOf(code: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < code.length; i++) {
    h ^= code.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}

/** The workers of one role in index order (stream1, stream2, ...), whatever order they were listed in. */
export function workersOf(workers: readonly PeerAddress[], role: string): PeerAddress[] {
  const index = (w: PeerAddress) => Number(w.id.slice(role.length));
  return workers.filter((w) => w.role === role).sort((a, b) => index(a) - index(b));
}

/**
 * The analytics workers (0-based positions among `owners`) that count partition `p`, first owner first: `replicas`
 * of them, p mod owners and the next ones round the ring, so each worker holds a full copy of the aggregates of
 * the partitions it counts and any one of them answers their stats.
 */
function ownersOfPartition(p: number, owners: number, replicas: number): number[] {
  const count = Math.min(Math.max(1, replicas), owners);
  return Array.from({ length: count }, (_, k) => (p + k) % owners);
}

/** The partitions analytics worker `index` (1-based) of `owners` counts, with `replicas` workers per partition. */
export function ownedPartitions(index: number, owners: number, partitions: number, replicas = 1): number[] {
  const out: number[] = [];
  for (let p = 0; p < partitions; p++) if (ownersOfPartition(p, owners, replicas).includes(index - 1)) out.push(p);
  return out;
}

/** The analytics workers that count a code's clicks, first owner first (empty when the cluster has none). */
export function ownersOf(
  code: string,
  workers: readonly PeerAddress[],
  partitions: number,
  replicas: number,
): PeerAddress[] {
  const analytics = workersOf(workers, 'analytics');
  if (analytics.length === 0) return [];
  return ownersOfPartition(partitionOf(code, partitions), analytics.length, replicas).map((i) => analytics[i]!);
}
