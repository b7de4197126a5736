// A bounded pool: run tasks with at most `concurrency` in flight, in the given order. Each transcode task is
// one ffmpeg process, so this is a pool of worker processes; the bench and single-process callers use it, the
// video service's workers take tasks from their replicated queue instead.
export async function runPool<T, R>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<R>,
  onDone?: (item: T, result: R, index: number) => void,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      const r = await work(items[i]!, i);
      results[i] = r;
      onDone?.(items[i]!, r, i);
    }
  });
  await Promise.all(lanes);
  return results;
}
