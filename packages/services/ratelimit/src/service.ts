/**
 * The rate-limiting service as `cluster up --service ratelimit` runs it: the rule store on the Raft members, then
 * the counter stores, then the check instances.
 */
import { IDLE_MEMBERS, type ServiceDefinition } from '@raftkit/http';
import { ruleRoutes } from './members/api.js';
import { checkRole } from './workers/check/worker.js';
import { RuleMachine, type RuleCommand, type RuleResult } from './machine.js';
import { storeRole } from './workers/store/worker.js';

export const ratelimitService: ServiceDefinition<RuleCommand, RuleResult> = {
  name: 'ratelimit',
  // The members hold rules and tenants, polled about once a second; the check instances serve every check.
  kinds: [
    {
      name: 'rules',
      provisioning: 'one group',
      createMachine: () => new RuleMachine(),
      raft: IDLE_MEMBERS.raft,
      replicas: 'every member',
    },
  ],
  routes: ruleRoutes,
  workers: [storeRole, checkRole],
};
