/**
 * Attempts counted by the gate that answered them. Tallied in a plain map and added to the Prometheus counter
 * every 100 ms: the counter's label-set key (a sort and escapes) showed on the rejection path, which must stay
 * cheap.
 */
import type { Counter, MetricsRegistry } from '@raftkit/http';
import type { AttemptAnswer } from './answers.js';

export class Tallies {
  private readonly tallies = new Map<string, number>();
  private readonly outcomes: Counter;

  constructor(metrics: MetricsRegistry) {
    this.outcomes = metrics.counter(
      'flash_attempts_total',
      'Attempts by the gate that answered them (gate) and the answer',
    );
  }

  /** Counts an attempt's outcome by gate. */
  tally(gate: string, answer: string): void {
    const key = `${gate}\u0000${answer}`;
    this.tallies.set(key, (this.tallies.get(key) ?? 0) + 1);
  }

  flush(): void {
    for (const [key, n] of this.tallies) {
      const [gate, answer] = key.split('\u0000') as [string, string];
      this.outcomes.inc(n, { gate, answer });
    }
    this.tallies.clear();
  }

  count(gate: string, answer: AttemptAnswer): AttemptAnswer {
    this.tally(gate, answer.status);
    return answer;
  }
}
