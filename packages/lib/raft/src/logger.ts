/**
 * The one logging interface of the repository. Raft is the bottom layer, so it is declared here: the RaftNode, the
 * GroupHost and the TCP transport log through it, and @raftkit/http's Logger (what every service and worker holds,
 * jsonLogger writes) is this same type re-exported, so a member passes its logger down without an adapter.
 */

/** Severity of a log line. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Where log lines go. */
export interface Logger {
  /** One line: `fields` are structured context (indexes, ids, error text). */
  log(level: LogLevel, message: string, fields?: Record<string, unknown>): void;
}

/** The logger of a part that was given none: it drops every line. */
export const silentLogger: Logger = { log: () => {} };
