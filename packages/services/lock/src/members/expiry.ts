/**
 * The leader's duty: expire sessions past their deadline, on its own clock, through the log. A new leader
 * first commits `extendAll` (every live session gets one more timeout), so a failover never expires a healthy
 * session; only then does it start expiring.
 */
import type { ServiceContext } from '@raftkit/http';
import type { LockCommand, LockMachine, LockResult } from '../machine.js';

export function startExpiry(
  service: ServiceContext<LockCommand, LockResult>,
  machine: LockMachine,
  everyMs = 250,
): () => void {
  let extendedInTerm = -1;
  let busy = false;
  const timer = setInterval(() => {
    if (busy || !service.group().node.isLeader) return;
    busy = true;
    void duty()
      .catch((e: unknown) => service.logger.log('warn', 'expiry round failed', { error: String(e) }))
      .finally(() => {
        busy = false;
      });
  }, everyMs);
  timer.unref();

  async function duty(): Promise<void> {
    const term = service.group().node.status().term;
    if (extendedInTerm !== term) {
      await service.group().node.propose({ op: 'extendAll' });
      extendedInTerm = term;
      service.logger.log('info', 'extended every session deadline after becoming leader', {
        sessions: machine.sessionCount,
      });
      return;
    }
    const overdue = machine.overdue(Date.now());
    if (overdue.length === 0) return;
    const result = await service.group().node.propose({ op: 'expire', ids: overdue });
    if (result.ok && result.op === 'expire' && result.expired.length > 0) {
      service.logger.log('info', 'sessions expired', { sessions: result.expired });
    }
  }

  return () => clearInterval(timer);
}
