/**
 * One ReadIndex for many checked reads of a post group: each read needs a barrier that starts after it arrived (a
 * barrier already running may have taken its read index before a delete the read must see was acknowledged), so a
 * read that arrives while one runs waits for the next, which every read arriving meanwhile shares. At most one
 * barrier runs and one waits per group, whatever the read rate; a read waits at most two barrier rounds.
 */
export function sharedBarrier(start: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let queued: Promise<void> | null = null;
  const run = (): Promise<void> => {
    const barrier = start();
    running = barrier;
    const clear = (): void => {
      if (running === barrier) running = null;
    };
    barrier.then(clear, clear);
    return barrier;
  };
  return () => {
    if (running === null) return run();
    if (queued === null) {
      queued = running
        .then(
          () => undefined,
          () => undefined,
        )
        .then(() => {
          queued = null;
          return run();
        });
    }
    return queued;
  };
}
