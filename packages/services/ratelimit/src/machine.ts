/**
 * The durable rule store's replicated state machine: registered tenants (service_ids) and their rules. Pure and
 * deterministic. `revision` is the log index of the last change, so check instances can ask "anything after
 * revision R?" and get nothing back when nothing changed.
 *
 * Invariants (checked by tests): every rule's service_id is a registered tenant; a rule never moves to another
 * tenant; the revision never decreases.
 */
import { Packr } from 'msgpackr';
import {
  booleanField,
  CommandShapeError,
  commandOf,
  integerField,
  nullableIntegerField,
  nullableStringField,
  numberField,
  objectField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { MAX_OPS_PER_TAKE } from './workers/store/protocol.js';
import {
  DIMENSIONS,
  MIN_REFILL_RATE,
  REGION_MODES,
  RULE_ID,
  SERVICE_ID,
  validEndpointPattern,
  type Rule,
} from './rules.js';

/** Every rule of a tenant may match one check, and one check's counters travel in one store take. */
export const MAX_RULES_PER_TENANT = MAX_OPS_PER_TAKE;

export type RuleCommand =
  | { op: 'registerTenant'; serviceId: string }
  | { op: 'putRule'; rule: Rule }
  /** `serviceId` null: the cluster operator deletes whatever tenant owns the rule. */
  | { op: 'deleteRule'; ruleId: string; serviceId: string | null };

export type RuleError = 'unknown_service' | 'rule_id_taken' | 'not_found' | 'too_many_rules';

export type RuleResult =
  | { ok: true; op: 'registerTenant'; created: boolean }
  | { ok: true; op: 'putRule'; created: boolean; revision: number }
  | { ok: true; op: 'deleteRule'; rule: Rule; revision: number }
  | { ok: false; error: RuleError };

/** Everything a check instance caches, at one revision. */
export interface RuleSet {
  revision: number;
  tenants: string[];
  rules: Rule[];
}

interface Snapshot {
  revision: number;
  tenants: string[];
  rules: Rule[];
}

const packr = new Packr({ useRecords: false });

/**
 * Throws CommandShapeError unless `command` is a RuleCommand whose rule is one parseRule could have made: checked
 * before anything changes, so a malformed entry (a bug or a forged one) is refused the same way on every member
 * (ApplyError for its proposer), and no check instance ever receives a rule it cannot evaluate.
 */
function checkRuleCommand(command: unknown): asserts command is RuleCommand {
  const c = commandOf(command, ['registerTenant', 'putRule', 'deleteRule'] as const);
  const oneOf = (value: string, allowed: readonly string[], what: string): void => {
    if (!allowed.includes(value)) throw new CommandShapeError(`${c.op}.${what}: expected one of ${allowed.join(', ')}`);
  };
  const matching = (value: string, pattern: RegExp, what: string): void => {
    if (!pattern.test(value)) throw new CommandShapeError(`${c.op}.${what}: does not match ${pattern}`);
  };
  switch (c.op) {
    case 'registerTenant':
      matching(stringField(c, 'serviceId'), SERVICE_ID, 'serviceId');
      return;
    case 'deleteRule': {
      matching(stringField(c, 'ruleId'), RULE_ID, 'ruleId');
      const owner = nullableStringField(c, 'serviceId');
      if (owner !== null) matching(owner, SERVICE_ID, 'serviceId');
      return;
    }
    case 'putRule': {
      const rule = objectField(c, 'rule');
      matching(stringField(rule, 'ruleId'), RULE_ID, 'rule.ruleId');
      matching(stringField(rule, 'serviceId'), SERVICE_ID, 'rule.serviceId');
      oneOf(stringField(rule, 'dimension'), DIMENSIONS, 'rule.dimension');
      if (!validEndpointPattern(stringField(rule, 'endpointPattern')))
        throw new CommandShapeError('putRule.rule.endpointPattern: not an endpoint pattern');
      numberField(rule, 'limit', 1);
      numberField(rule, 'windowSec', 1);
      numberField(rule, 'capacity', 1);
      numberField(rule, 'refillRate', MIN_REFILL_RATE);
      booleanField(rule, 'failClosed');
      if (rule.hotKey !== null) {
        const hot = objectField(rule, 'hotKey');
        numberField(hot, 'qpsThreshold', Number.MIN_VALUE);
        integerField(hot, 'syncMs', 1);
        integerField(hot, 'syncEveryN', 0);
      }
      oneOf(stringField(rule, 'regionMode'), REGION_MODES, 'rule.regionMode');
      nullableIntegerField(rule, 'expectedInstances', 1);
      return;
    }
  }
}

export class RuleMachine implements StateMachine<RuleCommand, RuleResult> {
  private tenants = new Set<string>();
  private rules = new Map<string, Rule>();
  /** Rules per tenant (derived from `rules`, not in snapshots). */
  private ruleCounts = new Map<string, number>();
  private revisionIndex = 0;

  apply(command: RuleCommand, ctx: ApplyContext): RuleResult {
    checkRuleCommand(command);
    switch (command.op) {
      case 'registerTenant': {
        if (this.tenants.has(command.serviceId)) return { ok: true, op: 'registerTenant', created: false };
        this.tenants.add(command.serviceId);
        this.revisionIndex = ctx.index;
        return { ok: true, op: 'registerTenant', created: true };
      }
      case 'putRule': {
        const rule = command.rule;
        if (!this.tenants.has(rule.serviceId)) return { ok: false, error: 'unknown_service' };
        const existing = this.rules.get(rule.ruleId);
        // A rule id is one tenant's for good: another tenant's PUT must neither change nor take it over.
        if (existing !== undefined && existing.serviceId !== rule.serviceId)
          return { ok: false, error: 'rule_id_taken' };
        const count = this.ruleCounts.get(rule.serviceId) ?? 0;
        if (existing === undefined && count >= MAX_RULES_PER_TENANT) return { ok: false, error: 'too_many_rules' };
        if (existing === undefined) this.ruleCounts.set(rule.serviceId, count + 1);
        this.rules.set(rule.ruleId, rule);
        this.revisionIndex = ctx.index;
        return { ok: true, op: 'putRule', created: existing === undefined, revision: ctx.index };
      }
      case 'deleteRule': {
        const rule = this.rules.get(command.ruleId);
        if (rule === undefined || (command.serviceId !== null && rule.serviceId !== command.serviceId))
          return { ok: false, error: 'not_found' };
        this.rules.delete(command.ruleId);
        this.ruleCounts.set(rule.serviceId, (this.ruleCounts.get(rule.serviceId) ?? 1) - 1);
        this.revisionIndex = ctx.index;
        return { ok: true, op: 'deleteRule', rule, revision: ctx.index };
      }
    }
  }

  get revision(): number {
    return this.revisionIndex;
  }

  hasTenant(serviceId: string): boolean {
    return this.tenants.has(serviceId);
  }

  getRule(ruleId: string): Rule | null {
    return this.rules.get(ruleId) ?? null;
  }

  /** One tenant's rules, ordered by rule id (a stable listing). */
  rulesOf(serviceId: string): Rule[] {
    return [...this.rules.values()]
      .filter((r) => r.serviceId === serviceId)
      .sort((a, b) => (a.ruleId < b.ruleId ? -1 : 1));
  }

  ruleSet(): RuleSet {
    return { revision: this.revisionIndex, tenants: [...this.tenants].sort(), rules: [...this.rules.values()] };
  }

  snapshot(): Uint8Array {
    const snap: Snapshot = {
      revision: this.revisionIndex,
      tenants: [...this.tenants],
      rules: [...this.rules.values()],
    };
    return packr.pack(snap);
  }

  restore(data: Uint8Array): void {
    const snap = packr.unpack(data) as Snapshot;
    this.revisionIndex = snap.revision;
    this.tenants = new Set(snap.tenants);
    this.rules = new Map(snap.rules.map((r) => [r.ruleId, r]));
    this.ruleCounts = new Map();
    for (const r of snap.rules) this.ruleCounts.set(r.serviceId, (this.ruleCounts.get(r.serviceId) ?? 0) + 1);
  }
}
