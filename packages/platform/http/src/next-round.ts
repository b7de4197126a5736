/**
 * Coalesces identical reads that fan out to many members (e.g. a public listing that asks every group): at most one
 * run per key is in flight; callers arriving while it runs share the next run, which starts when it ends. A caller's
 * answer therefore always comes from a run that started after it arrived (it sees every write acknowledged before
 * it asked), while a crowd of anonymous callers costs the members one fan-out at a time instead of one each.
 */
export class NextRoundCoalescer<T> {
  private readonly running = new Map<string, Promise<T>>();
  private readonly waiting = new Map<string, Promise<T>>();
  /** Runs started, for metrics and tests. */
  runs = 0;

  run(key: string, work: () => Promise<T>): Promise<T> {
    const queued = this.waiting.get(key);
    if (queued !== undefined) return queued;
    const current = this.running.get(key);
    if (current === undefined) return this.start(key, work);
    const next = current
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        this.waiting.delete(key);
        return this.start(key, work);
      });
    this.waiting.set(key, next);
    return next;
  }

  private start(key: string, work: () => Promise<T>): Promise<T> {
    this.runs++;
    const run = Promise.resolve()
      .then(work)
      .finally(() => {
        if (this.running.get(key) === run) this.running.delete(key);
      });
    this.running.set(key, run);
    return run;
  }
}
