/**
 * The check instances' in-memory rule cache: every tenant's rules indexed so a check finds the rules matching
 * (service_id, endpoint) with one map get. Built once per rule-set revision; never mutated afterwards.
 */
import { patternMatches, type Rule } from '../../rules.js';

/** Distinct (service_id, endpoint) pairs remembered per revision; callers choose endpoints, so it is bounded. */
const MAX_MEMO = 100_000;

export class RuleIndex {
  private readonly tenants: Set<string>;
  private readonly byTenant = new Map<string, Rule[]>();
  /** Matching rules by tenant, then endpoint: two gets on the request's own strings, no key built per check. */
  private readonly memo = new Map<string, Map<string, readonly Rule[]>>();
  private memoSize = 0;

  constructor(
    readonly revision: number,
    tenants: readonly string[],
    readonly rules: readonly Rule[],
  ) {
    this.tenants = new Set(tenants);
    for (const rule of rules) {
      let list = this.byTenant.get(rule.serviceId);
      if (list === undefined) this.byTenant.set(rule.serviceId, (list = []));
      list.push(rule);
    }
    // A stable order, so one check's counter ops are always sent in the same order.
    for (const list of this.byTenant.values()) list.sort((a, b) => (a.ruleId < b.ruleId ? -1 : 1));
  }

  static empty(): RuleIndex {
    return new RuleIndex(-1, [], []);
  }

  hasTenant(serviceId: string): boolean {
    return this.tenants.has(serviceId);
  }

  /** The tenant's rules whose endpoint pattern covers `endpoint` (identifiers are filtered by the caller). */
  rulesFor(serviceId: string, endpoint: string): readonly Rule[] {
    let endpoints = this.memo.get(serviceId);
    let found = endpoints?.get(endpoint);
    if (found === undefined) {
      found = (this.byTenant.get(serviceId) ?? []).filter((r) => patternMatches(r.endpointPattern, endpoint));
      if (this.memoSize >= MAX_MEMO) {
        this.memo.clear();
        this.memoSize = 0;
        endpoints = undefined;
      }
      if (endpoints === undefined) this.memo.set(serviceId, (endpoints = new Map()));
      endpoints.set(endpoint, found);
      this.memoSize++;
    }
    return found;
  }
}
