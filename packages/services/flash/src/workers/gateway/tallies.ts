/**
 * Attempts counted by the gate that answered them. Tallied in plain maps and added to the Prometheus counter
 * every 100 ms: the counter's label-set key (a sort and escapes) showed on the rejection path, which must stay
 * cheap. Keyed gate, then answer: both are string constants of the code, whose hashes V8 keeps, so a tally joins
 * no string and hashes nothing new (a joined key was hashed afresh on every attempt).
 */
import type { Counter, MetricsRegistry } from '@raftkit/http';
import type { AttemptAnswer } from './answers.js';

export class Tallies {
  private readonly tallies = new Map<string, Map<string, number>>();
  private readonly outcomes: Counter;

  constructor(metrics: MetricsRegistry) {
    this.outcomes = metrics.counter(
      'flash_attempts_total',
      'Attempts by the gate that answered them (gate) and the answer',
    );
  }

  /** Counts an attempt's outcome by gate. */
  tally(gate: string, answer: string): void {
    let byAnswer = this.tallies.get(gate);
    if (byAnswer === undefined) this.tallies.set(gate, (byAnswer = new Map()));
    byAnswer.set(answer, (byAnswer.get(answer) ?? 0) + 1);
  }

  flush(): void {
    for (const [gate, byAnswer] of this.tallies) {
      for (const [answer, n] of byAnswer) if (n > 0) this.outcomes.inc(n, { gate, answer });
      byAnswer.clear();
    }
  }

  count(gate: string, answer: AttemptAnswer): AttemptAnswer {
    this.tally(gate, answer.status);
    return answer;
  }
}
