/**
 * Keeps a check instance's rule cache current: polls the rule store (any member) every second with the revision
 * it holds; the members answer `changed: false` when nothing changed, so an idle poll costs one small request.
 * The hot path only reads `current`.
 */
import type { ClusterClient, Logger } from '@raftkit/http';
import type { Rule } from '../../rules.js';
import { RuleIndex } from './rule-index.js';

interface RuleSetAnswer {
  revision: number;
  changed: boolean;
  tenants?: string[];
  rules?: Rule[];
}

export class RuleSync {
  current: RuleIndex = RuleIndex.empty();
  /** Told of every new rule set (the engine sets it; the first poll has no hot counters to drop). */
  onChange: (index: RuleIndex) => void = () => undefined;
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(
    private readonly members: ClusterClient,
    private readonly logger: Logger,
  ) {}

  /** One poll; resolves true when the cache holds a rule set (now or before). */
  async poll(timeoutMs = 2_000): Promise<boolean> {
    // Serializable: the member's own copy, without the round of heartbeats a linearizable read costs. Polled every
    // second by every instance, that round kept the idle rule store from ever quiescing; a member applies a change
    // within milliseconds of its commit, so a change still reaches every instance within about a second.
    const path = `/v1/rule-set?since=${this.current.revision}&consistency=serializable`;
    const answer = (await this.members.call('GET', path, undefined, {}, timeoutMs)) as RuleSetAnswer;
    // A lagging member may answer an older revision: never go back.
    if (answer.changed && answer.revision > this.current.revision) {
      this.current = new RuleIndex(answer.revision, answer.tenants ?? [], answer.rules ?? []);
      this.onChange(this.current);
    }
    return true;
  }

  /** Poll until one answer arrives or `deadlineMs` passes; then keep polling every `everyMs`. */
  async start(everyMs = 1_000, deadlineMs = 15_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    while (Date.now() < deadline && !(await this.poll().catch(() => false)))
      await new Promise((r) => setTimeout(r, 200));
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      this.poll()
        .catch((e: unknown) =>
          this.logger.log('warn', 'rule poll failed', { error: String((e as Error)?.message ?? e) }),
        )
        .finally(() => {
          this.busy = false;
        });
    }, everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
