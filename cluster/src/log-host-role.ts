/**
 * A worker role whose processes host the replicated event log (packages/platform/log) for a single-group service:
 * a service whose members run one Raft group of their own (shortlink's link store) cannot hold the log's
 * partition groups beside it, so `count` workers of this role form a small many-groups cluster of their own (a
 * ManagedHost each, its Raft listener on the worker's second address, its LevelDB in the worker's folder) and the
 * service's other workers use the log through LogClient on their HTTP addresses. The topics are `internal`: only
 * the cluster token and the service's own workers' token may use them.
 */
import type { RunningWorker, WorkerOptions, WorkerRole } from '@raftkit/http';
import { combineServices } from '@raftkit/http';
import { createLogService } from '@raftkit/log';
import { startManyGroupsMember } from './many-groups.js';

export function logHostRole(service: string, role: string, count: number, slot?: number): WorkerRole {
  return {
    role,
    count,
    ...(slot === undefined ? {} : { slot }),
    start: async (options: WorkerOptions): Promise<RunningWorker> => {
      // Every worker of the role is a founding member of the meta group: the role's processes start together.
      const bootstrap = Object.fromEntries(
        options.workers
          .filter((w) => w.role === role && w.tcpAddress !== undefined)
          .map((w) => [w.id, w.tcpAddress!] as const),
      );
      const running = await startManyGroupsMember(
        combineServices(service, [createLogService({ defaultAccess: 'internal' })]),
        {
          id: options.id,
          dataDir: options.dataDir,
          raftAddress: options.tcpAddress,
          httpAddress: options.httpAddress,
          bootstrap,
          tokens: options.tokens,
          logger: options.logger,
        },
      );
      return { httpPort: running.httpPort, stop: () => running.stop() };
    },
  };
}
