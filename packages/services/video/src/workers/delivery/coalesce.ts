/**
 * Single flight: while one fetch of a key is in progress, every other request for that key waits on it instead
 * of starting its own. A thousand simultaneous misses of a new segment make one upstream fetch per tier.
 */
export class Coalescer<T> {
  private readonly inFlight = new Map<string, Promise<T>>();

  /** Resolves with the result of the one fetch of `key` in flight, starting `fetch` only when none is. */
  run(key: string, fetch: () => Promise<T>, onJoin?: () => void): Promise<T> {
    const running = this.inFlight.get(key);
    if (running !== undefined) {
      onJoin?.();
      return running;
    }
    const started = fetch().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, started);
    return started;
  }

  get size(): number {
    return this.inFlight.size;
  }
}
