/** Structured logs: one JSON object a line, each with the time, level, member id and term. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  log(level: LogLevel, msg: string, fields?: Record<string, unknown>): void;
}

export function jsonLogger(base: () => Record<string, unknown>, write: (line: string) => void = (l) => process.stdout.write(l)): Logger {
  return {
    log(level, msg, fields = {}) {
      write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...base(), ...fields }) + '\n');
    },
  };
}
