/** What every long-running process the CLI starts (member or worker) does about crashes and stop signals. */
import type { Logger } from '@raftkit/http';

/** Log an uncaught exception as one JSON line and exit 1: the CLI's status then shows the process down. */
export function exitOnUncaught(logger: Logger): void {
  process.on('uncaughtException', (e) => {
    logger.log('error', 'uncaught exception', { error: String(e?.stack ?? e) });
    process.exit(1);
  });
}

/** On the first SIGTERM or SIGINT, run `stop` and exit 0 (a second signal while stopping is ignored). */
export function stopOnSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      logger.log('info', 'stopping', { signal });
      void stop().then(() => process.exit(0));
    });
  }
}
