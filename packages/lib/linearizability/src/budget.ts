/**
 * How much search the checker may do. Shared by all partitions of one check.
 *
 * Two independent limits, either optional:
 * - a step count, fully deterministic (what a simulator wants: the same seed
 *   always gives the same verdict);
 * - a wall-clock deadline, read through an injected clock so the core has no
 *   hidden time source. The clock is read on the first step and then every
 *   {@link CLOCK_PERIOD} steps, to keep it off the hot path.
 */
export interface Budget {
  /** Takes one unit of search; returns false (and takes nothing) once the budget is spent. */
  spend(): boolean;
  readonly stepsUsed: number;
  readonly exhausted: boolean;
}

const CLOCK_PERIOD = 256;

interface BudgetLimits {
  readonly maxSteps?: number;
  /** Returns true once the deadline has passed. */
  readonly deadlinePassed?: () => boolean;
}

export function createBudget(limits: BudgetLimits): Budget {
  const maxSteps = limits.maxSteps ?? Infinity;
  const deadlinePassed = limits.deadlinePassed;
  let stepsUsed = 0;
  let exhausted = false;
  return {
    spend(): boolean {
      if (exhausted) return false;
      const clockDue = deadlinePassed !== undefined && stepsUsed % CLOCK_PERIOD === 0;
      if (stepsUsed >= maxSteps || (clockDue && deadlinePassed())) {
        exhausted = true;
        return false;
      }
      stepsUsed++;
      return true;
    },
    get stepsUsed() {
      return stepsUsed;
    },
    get exhausted() {
      return exhausted;
    },
  };
}
