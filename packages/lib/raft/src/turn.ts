/**
 * One Ready pass for every group of a process (multi-raft engines drain all their groups' Readies in one loop, as
 * CockroachDB's and TiKV's raft stores do). A RaftNode on its own yields one turn of the event loop (setImmediate)
 * before it drains its Ready, so that a burst of proposals and messages joins one batch; with a thousand groups in
 * a process that is a timer callback, a promise and a microtask per group per round. A GroupHost gives its groups
 * one ReadyTurn instead: every group with work in this turn of the event loop is run from one callback, back to
 * back, in the order they asked.
 */

/** Runs, in one callback at the end of this turn of the event loop, every task scheduled during it. */
export class ReadyTurn {
  private due: Array<() => void> = [];
  private scheduled = false;

  /** Runs `task` in the next pass. A task scheduled during a pass runs in the pass after it. */
  schedule(task: () => void): void {
    this.due.push(task);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.run);
  }

  private readonly run = (): void => {
    this.scheduled = false;
    const due = this.due;
    this.due = [];
    for (const task of due) task();
  };
}
