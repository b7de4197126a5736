/**
 * The spec's synthetic load before go-live (about 1% of the expected peak for 30 s, 1 minute before start_at): a
 * paced loop of synthetic attempts through the gateway's own gates. Each is a dry run (workers/gateway/gateway.ts): it spends no
 * admission token and writes nothing, so it never consumes real inventory; what it proves is that every gate and
 * the path to each shard's group answer before the crowd arrives.
 */

/** What a smoke run did (GET /api/flash/{deal_id}/prewarm shows it). */
export interface SmokeReport {
  started_at: string;
  seconds: number;
  rps: number;
  sent: number;
  /** Attempts answered by the dry run (every gate passed, the shard's count read). */
  answered: number;
  /** Attempts a gate refused (a rate limit, the deal's state): expected for some, and counted. */
  refused: number;
  /** Attempts that failed (the inventory unreachable): what the smoke test is there to find. */
  errors: number;
  done: boolean;
}

/** Sends `rps` attempts a second for `ms` (paced every 100 ms), each through `attempt(n)`. */
export async function runSmoke(
  report: SmokeReport,
  ms: number,
  rps: number,
  stopped: () => boolean,
  attempt: (n: number) => Promise<unknown>,
): Promise<void> {
  const start = Date.now();
  const inFlight: Array<Promise<void>> = [];
  let n = 0;
  while (!stopped() && Date.now() - start < ms && rps > 0) {
    const due = Math.floor(((Date.now() - start) / 1000) * rps) + 1;
    for (; n < due; n++) {
      report.sent++;
      inFlight.push(
        attempt(n).then(
          () => void report.answered++,
          (error: unknown) => {
            const status = (error as { status?: number }).status;
            if (typeof status === 'number' && status < 500) report.refused++;
            else report.errors++;
          },
        ),
      );
    }
    if (inFlight.length > 1_000) await Promise.all(inFlight.splice(0));
    await new Promise((r) => setTimeout(r, 100));
  }
  await Promise.all(inFlight);
  report.done = true;
}
