/**
 * The rule store's HTTP endpoints on the Raft members: tenants, the rule management API, and the rule set the
 * check instances poll. The contract (statuses, bodies, decisions) is in README.md.
 */
import {
  badRequest,
  bearerToken,
  conflict,
  HttpError,
  notFound,
  Reply,
  type RequestContext,
  type ServiceContext,
} from '@raftkit/http';
import { MAX_RULES_PER_TENANT, type RuleMachine, type RuleCommand, type RuleResult } from '../machine.js';
import { parseRule, ruleBody, RULE_ID, SERVICE_ID } from '../rules.js';
import { requireTenantAccess, tenantKeys, tenantOf } from '../tenants.js';

type Service = ServiceContext<RuleCommand, RuleResult>;

function serviceIdParam(value: string | undefined | null, field = 'service_id'): string {
  if (value === undefined || value === null || !SERVICE_ID.test(value)) {
    throw badRequest('invalid_field', `${field} must be 1 to 58 characters of A-Z a-z 0-9 _ -`, { field });
  }
  return value;
}

function ruleIdParam(ctx: RequestContext): string {
  const id = ctx.params.rule_id ?? '';
  if (!RULE_ID.test(id)) throw badRequest('invalid_field', 'rule_id must be a UUID', { field: 'rule_id' });
  return id.toLowerCase();
}

const unknownService = (serviceId: string): HttpError =>
  badRequest('unknown_service', `service_id ${serviceId} is not registered (PUT /v1/tenants/{service_id})`, {
    field: 'service_id',
  });

function refused(result: RuleResult, serviceId: string): never {
  if (result.ok) throw new Error('not a refusal');
  switch (result.error) {
    case 'unknown_service':
      throw unknownService(serviceId);
    case 'rule_id_taken':
      throw conflict('rule_id_taken', 'this rule_id belongs to another tenant: choose another UUID');
    case 'not_found':
      throw notFound('no such rule');
    case 'too_many_rules':
      throw conflict('too_many_rules', `a tenant has at most ${MAX_RULES_PER_TENANT} rules: delete one first`, {
        limit: MAX_RULES_PER_TENANT,
      });
  }
}

/** The cluster token itself, for deriving tenant keys: only a request made with it can ask for them. */
function clusterToken(service: Service, ctx: RequestContext): string {
  if (service.principal(ctx).kind !== 'cluster')
    throw new HttpError(403, 'forbidden', 'tenants are managed with the cluster token');
  return bearerToken(ctx.req)!;
}

export function ruleRoutes(service: Service): void {
  /** The service's one group (its kind provisioned as 'one group'). */
  const group = service.group();
  const machine = group.machine as RuleMachine;

  service.router
    .put('/v1/tenants/:service_id', { admits: 'cluster' }, async (ctx) => {
      const token = clusterToken(service, ctx);
      const serviceId = serviceIdParam(ctx.params.service_id);
      const result = await group.write({ op: 'registerTenant', serviceId }, ctx);
      if (!result.ok || result.op !== 'registerTenant') refused(result, serviceId);
      const keys = tenantKeys(token, serviceId);
      return { service_id: serviceId, created: result.created, admin_key: keys.adminKey, check_key: keys.checkKey };
    })
    .get('/v1/tenants/:service_id', { admits: 'cluster' }, async (ctx) => {
      const token = clusterToken(service, ctx);
      const serviceId = serviceIdParam(ctx.params.service_id);
      await group.readBarrier(ctx);
      if (!machine.hasTenant(serviceId)) throw notFound(`service_id ${serviceId} is not registered`);
      const keys = tenantKeys(token, serviceId);
      return { service_id: serviceId, admin_key: keys.adminKey, check_key: keys.checkKey };
    })
    .get('/v1/rule-set', { admits: 'cluster' }, async (ctx) => {
      if (service.principal(ctx).kind !== 'cluster')
        throw new HttpError(403, 'forbidden', 'the rule set is for check instances (cluster token)');
      const sinceText = ctx.query.get('since') ?? '-1';
      const since = Number(sinceText);
      if (!Number.isSafeInteger(since) || since < -1)
        throw badRequest('invalid_query', 'since must be a revision (an integer >= -1)', { field: 'since' });
      await group.readBarrier(ctx);
      const set = machine.ruleSet();
      if (set.revision === since) return { revision: set.revision, changed: false };
      // The internal form (camelCase): only check instances read it, and they cache exactly this.
      return { revision: set.revision, changed: true, tenants: set.tenants, rules: set.rules };
    })
    .put('/v1/rules/:rule_id', { admits: 'authenticated' }, async (ctx) => {
      const principal = service.principal(ctx);
      tenantOf(principal, 'admin');
      const rule = parseRule(ruleIdParam(ctx), await ctx.json());
      requireTenantAccess(principal, rule.serviceId, 'admin');
      const result = await group.write({ op: 'putRule', rule }, ctx);
      if (!result.ok || result.op !== 'putRule') refused(result, rule.serviceId);
      // The spec answers 200 whether the rule was created or replaced; `created` tells which.
      return { ...ruleBody(rule), created: result.created, revision: result.revision };
    })
    .get('/v1/rules', { admits: 'authenticated' }, async (ctx) => {
      const own = tenantOf(service.principal(ctx), 'admin');
      const asked = ctx.query.get('service_id');
      if (own === null && asked === null)
        throw badRequest('invalid_query', 'service_id is required with the cluster token', { field: 'service_id' });
      const serviceId = serviceIdParam(asked ?? own);
      requireTenantAccess(service.principal(ctx), serviceId, 'admin');
      await group.readBarrier(ctx);
      if (!machine.hasTenant(serviceId)) throw notFound(`service_id ${serviceId} is not registered`);
      return machine.rulesOf(serviceId).map(ruleBody);
    })
    .get('/v1/rules/:rule_id', { admits: 'authenticated' }, async (ctx) => {
      const own = tenantOf(service.principal(ctx), 'admin');
      const ruleId = ruleIdParam(ctx);
      await group.readBarrier(ctx);
      const rule = machine.getRule(ruleId);
      // Another tenant's rule is answered exactly as a missing one: a tenant never learns of it.
      if (rule === null || (own !== null && rule.serviceId !== own)) throw notFound('no such rule');
      return ruleBody(rule);
    })
    .delete('/v1/rules/:rule_id', { admits: 'authenticated' }, async (ctx) => {
      const own = tenantOf(service.principal(ctx), 'admin');
      const ruleId = ruleIdParam(ctx);
      const result = await group.write({ op: 'deleteRule', ruleId, serviceId: own }, ctx);
      if (!result.ok || result.op !== 'deleteRule') refused(result, own ?? '');
      return new Reply(204, undefined);
    });
}
