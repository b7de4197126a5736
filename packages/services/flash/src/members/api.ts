/**
 * The flash-deal service on the Raft members: a grouped service (like the event log) whose groups are the inventory
 * groups (placement.ts), each running a FlashMachine. The members serve only internal endpoints (cluster token): the
 * gateways (workers/gateway/gateway.ts) serve the public surface and reach these through RaftInventory. Every change is one entry
 * committed on a majority before it is answered: the decrement and the reservation record are the same entry, so a
 * won answer is never given for a unit that a failover could hand out again (the spec's rule 8).
 *
 * Background jobs, run by each group's leader: the go-live (at start_at by the leader's clock, recorded in the log,
 * so every member and gateway trusts the record, not its own clock) and the expiry of unpaid reservations.
 */
import {
  badRequest,
  type ServiceContext,
  HttpError,
  notFound,
  requireObject,
  type ServiceDefinition,
  type OnRequestKind,
  type RequestContext,
} from '@raftkit/http';
import type { ManagedGroupOptions, RaftNode } from '@raftkit/raft';
import { checkFlashCommand, FlashMachine, type FlashCommand, type FlashResult } from '../machine.js';
import {
  FLASH_COMMAND_ROUTE,
  GROUP_PREFIX,
  INVENTORY_GROUPS,
  inventoryGroup,
  parseInventoryGroup,
} from '../placement.js';
import { gatewayRole } from '../workers/gateway/gateway.js';

type FlashNode = RaftNode<FlashCommand, FlashResult, FlashMachine>;

/** How often a group's leader looks for deals to put live and reservations to expire. */
const JOB_EVERY_MS = 500;
/** How long an ended deal's records (reservations, paid orders) stay readable before the leader drops them. */
const KEEP_ENDED_MS = 24 * 60 * 60_000;

/**
 * The inventory groups: one FlashMachine each, on every live process up to five unless the cluster sets its count
 * (`cluster up --set replicas=3`). Five, not the project's 3: a won unit is the one thing the sale must never lose
 * or sell twice, and an inventory group answers attempts only while it has a quorum, so it is worth surviving two
 * failures for; there are only four such groups, so the extra fsyncs and replicas cost little.
 */
const INVENTORY_KIND: OnRequestKind = {
  name: 'inventory',
  provisioning: 'on request',
  includes: (name) => parseInventoryGroup(name) !== null,
  groupOptions: () => ({ stateMachine: new FlashMachine() as unknown as ManagedGroupOptions['stateMachine'] }),
  replicas: 5,
};

export function createFlashService(): ServiceDefinition {
  return {
    name: 'flash',
    kinds: [INVENTORY_KIND],
    routes: flashRoutes,
    workers: [gatewayRole],
  };
}

function flashRoutes(service: ServiceContext): void {
  const managed = service.managed;

  const nodeOf = (ctx: RequestContext): FlashNode => {
    const group = ctx.params.group ?? '';
    if (parseInventoryGroup(group) === null)
      throw badRequest('invalid_group', `an inventory group is ${GROUP_PREFIX}0..${INVENTORY_GROUPS - 1}`, {
        field: 'group',
      });
    return service.requireGroup<FlashCommand, FlashResult, FlashMachine>(ctx, group) as FlashNode;
  };

  // The leaders' jobs: go-live at start_at, expiry of unpaid reservations. Proposals are re-checked by the machine
  // against the entry's time, so a skewed leader clock can make them early (refused) or late, never wrong.
  const inFlight = new Set<string>();
  const job = setInterval(() => {
    for (let g = 0; g < INVENTORY_GROUPS; g++) {
      const name = inventoryGroup(g);
      const node = managed.group<FlashCommand, FlashResult, FlashMachine>(name);
      if (node === undefined || !node.isLeader || inFlight.has(name)) continue;
      const now = Date.now();
      const work: Array<Promise<unknown>> = [];
      const due = node.readLocal((m) => m.dueReservations(now, 1_000));
      if (due.length > 0) work.push(node.propose({ op: 'expire', reservationIds: due }));
      for (const dealId of node.readLocal((m) => m.dealIds())) {
        const deal = node.readLocal((m) => m.getDeal(dealId));
        if (deal !== null && deal.liveAt === null && now >= deal.startAt && now < deal.endAt)
          work.push(node.propose({ op: 'goLive', dealId }));
        // Bounded memory: a deal (its reservations and orders) is kept a day after its end, then dropped.
        if (deal !== null && now >= deal.endAt + KEEP_ENDED_MS) work.push(node.propose({ op: 'dropDeal', dealId }));
      }
      if (work.length === 0) continue;
      inFlight.add(name);
      void Promise.allSettled(work).finally(() => inFlight.delete(name));
    }
  }, JOB_EVERY_MS);
  job.unref();
  service.onStop(() => clearInterval(job));

  // One command through the group's log, answered once committed and applied (never ahead of the log).
  service.commandRoute<FlashCommand, FlashResult>(FLASH_COMMAND_ROUTE, {
    admits: 'cluster',
    check: (body) => {
      const command = requireObject(body, 'command');
      checkFlashCommand(command);
      return command;
    },
    group: (ctx) => nodeOf(ctx),
  });

  service.router
    // The inventory groups, created on first use (a retry, or a second gateway racing the first, finds them made).
    .post('/v1/flash/inventory-groups', { admits: 'cluster' }, async () => {
      const catalog = managed.catalog();
      const missing = Array.from({ length: INVENTORY_GROUPS }, (_, g) => inventoryGroup(g)).filter(
        (n) => catalog.group(n) === undefined,
      );
      if (missing.length > 0) {
        const { result } = await service.createGroups(
          INVENTORY_KIND,
          missing.map((name) => ({ name, data: { service: 'flash' } })),
        );
        if (!result.ok && result.code !== 'exists') throw new HttpError(500, 'internal', result.message);
      }
      return { groups: Array.from({ length: INVENTORY_GROUPS }, (_, g) => inventoryGroup(g)), created: missing };
    })
    .get('/v1/flash/groups/:group/deals', { admits: 'cluster' }, async (ctx) => {
      const node = nodeOf(ctx);
      await service.group(node).readBarrier(ctx);
      return { deals: node.readLocal((m) => m.dealIds().map((id) => m.getDeal(id)!)) };
    })
    .get('/v1/flash/groups/:group/deals/:deal', { admits: 'cluster' }, async (ctx) => {
      const node = nodeOf(ctx);
      await service.group(node).readBarrier(ctx);
      const deal = node.readLocal((m) => m.getDeal(ctx.params.deal!));
      if (deal === null)
        throw notFound(`no deal ${ctx.params.deal} in ${ctx.params.group}`, { deal_id: ctx.params.deal });
      // `?winners_from=N`: the winners from the N-th on, read with the counts (one consistent copy).
      const fromText = ctx.query.get('winners_from');
      if (fromText === null) return deal;
      if (!/^\d{1,9}$/.test(fromText))
        throw badRequest('invalid_query', 'winners_from must be a count', { field: 'winners_from' });
      return { ...deal, ...node.readLocal((m) => m.winnersFrom(ctx.params.deal!, Number(fromText))) };
    })
    .get('/v1/flash/groups/:group/deals/:deal/attempts', { admits: 'cluster' }, async (ctx) => {
      const node = nodeOf(ctx);
      await service.group(node).readBarrier(ctx);
      const user = ctx.query.get('user') ?? '';
      const key = ctx.query.get('key') ?? '';
      if (user.length === 0 || key.length === 0)
        throw badRequest('invalid_query', 'user and key are required', { field: user.length === 0 ? 'user' : 'key' });
      const record = node.readLocal((m) => m.attemptOf(ctx.params.deal!, user, key));
      if (record === null)
        throw notFound(`no deal ${ctx.params.deal} in ${ctx.params.group}`, { deal_id: ctx.params.deal });
      return record;
    })
    .get('/v1/flash/groups/:group/reservations/:id', { admits: 'cluster' }, async (ctx) => {
      const node = nodeOf(ctx);
      await service.group(node).readBarrier(ctx);
      const reservation = node.readLocal((m) => m.getReservation(ctx.params.id!));
      if (reservation === null) throw notFound(`no reservation ${ctx.params.id}`, { reservation_id: ctx.params.id });
      return reservation;
    });
}
