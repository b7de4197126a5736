/**
 * The gate the clients' operations pass through, so a nemesis can stop client traffic (the `quiet` nemesis): while
 * it is held no client starts an operation, and `hold` resolves once the operations already under way have
 * finished, so the quiet spell is one with nothing sent.
 */
export class TrafficGate {
  private holds = 0;
  private inFlight = 0;
  private opened: Array<() => void> = [];
  private drained: Array<() => void> = [];

  get held(): boolean {
    return this.holds > 0;
  }

  /** Before an operation: waits while the gate is held, then counts the operation as under way. */
  async enter(): Promise<void> {
    while (this.holds > 0) await new Promise<void>((r) => this.opened.push(r));
    this.inFlight++;
  }

  /** After an operation (whatever its outcome). */
  leave(): void {
    this.inFlight--;
    if (this.inFlight === 0) for (const r of this.drained.splice(0)) r();
  }

  /** Stops new operations; resolves once none is under way, or after `maxWaitMs` (a client stuck in a fault). */
  async hold(maxWaitMs: number): Promise<void> {
    this.holds++;
    if (this.inFlight === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, maxWaitMs);
      this.drained.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  release(): void {
    if (this.holds === 0) return;
    this.holds--;
    if (this.holds === 0) for (const r of this.opened.splice(0)) r();
  }

  /** The run is over: every hold ends and nobody waits again. */
  releaseAll(): void {
    this.holds = 0;
    for (const r of this.opened.splice(0)) r();
  }
}
