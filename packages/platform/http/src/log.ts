/**
 * Structured logs: one JSON object a line, each with the time, level, member id and term. The Logger interface is
 * raft's (the bottom layer's, shared by its node, host and transport), so a member hands its logger straight down.
 */
import type { Logger } from '@raftkit/raft';

export type { Logger, LogLevel } from '@raftkit/raft';

export function jsonLogger(
  base: () => Record<string, unknown>,
  write: (line: string) => void = (l) => process.stdout.write(l),
): Logger {
  return {
    log(level, msg, fields = {}) {
      write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...base(), ...fields }) + '\n');
    },
  };
}
