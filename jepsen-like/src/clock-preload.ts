/**
 * Loaded into a member process with `node --import` when a run skews clocks. Shifts the member's wall clock
 * (Date.now and new Date()) by an offset read from the file named by JEPSEN_CLOCK_FILE (`{"offsetMs": N}`),
 * re-read whenever the process gets SIGUSR2. Like Jepsen's clock nemesis (settimeofday), only the wall clock
 * moves; monotonic time (performance.now, timers) does not.
 */
import { readFileSync } from 'node:fs';

const file = process.env.JEPSEN_CLOCK_FILE;
let offsetMs = 0;

function reload(): void {
  if (file === undefined) return;
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { offsetMs?: unknown };
    offsetMs = typeof parsed.offsetMs === 'number' && Number.isFinite(parsed.offsetMs) ? parsed.offsetMs : 0;
  } catch {
    offsetMs = 0;
  }
}

reload();
process.on('SIGUSR2', reload);

const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);

class SkewedDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(realNow() + offsetMs);
    else super(...(args as [string | number | Date]));
  }

  static override now(): number {
    return realNow() + offsetMs;
  }
}

globalThis.Date = SkewedDate as DateConstructor;
