/**
 * Where the replicas of each store partition live: with N store workers there are N partitions, and partition p is
 * held by workers p, p+1, p+2 (mod N, 0-based), so 4 workers hold 3 replicas of 4 partitions and any one worker down
 * leaves 2 of each. The first is the partition's preferred replica: clients try it first (its hot cache is the warm
 * one) and it proposes the partition's background ops (count folds, sweeps).
 */

/** Replicas per partition (fewer when there are fewer store workers). */
const STORE_REPLICAS = 3;

/** The 0-based worker indexes holding `partition`, preferred first. */
export function replicaWorkers(partition: number, workers: number): number[] {
  const n = Math.min(STORE_REPLICAS, workers);
  return Array.from({ length: n }, (_, i) => (partition + i) % workers);
}

/** The partitions the 0-based worker `worker` holds a replica of. */
export function partitionsOfWorker(worker: number, workers: number): number[] {
  const out: number[] = [];
  for (let p = 0; p < workers; p++) if (replicaWorkers(p, workers).includes(worker)) out.push(p);
  return out;
}
