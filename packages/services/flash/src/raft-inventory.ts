/**
 * Our inventory backend: the shards as Raft groups on the members, reached through the project's GroupRouter
 * (straight to each group's leader, following 421/503 answers). Every change is a command committed on a majority
 * before it is answered.
 */
import { GroupClient, GroupRouter, ServiceError } from '@raftkit/http';
import type { DealView, FlashCommand, FlashResult, ReservationView } from './machine.js';
import {
  FLASH_COMMAND_ROUTE,
  groupOfShard,
  groupsOfDeal,
  INVENTORY_GROUPS,
  inventoryGroup,
  shardCounts,
} from './placement.js';
import {
  shardOfReservation,
  type AttemptRecord,
  type DealSnapshot,
  type DealSpec,
  type InventoryBackend,
  type ReservationChange,
  type ReserveOutcome,
  type ReserveRequest,
} from './inventory.js';

export interface RaftInventoryOptions {
  /** Members' base URLs. */
  endpoints: string[];
  /** The cluster token (the members' internal endpoints admit only it). */
  token: string;
  /** Per call; a reserve that is not decided in time is answered queued by the gateway. Default 5 s. */
  timeoutMs?: number;
  connections?: number;
}

const path = (group: string, rest: string): string => `/v1/flash/groups/${encodeURIComponent(group)}${rest}`;

export class RaftInventory implements InventoryBackend {
  private readonly router: GroupRouter;
  private readonly commands: GroupClient<FlashCommand, FlashResult>;
  private groupsReady = false;
  /** Per deal, per group: winners already handed to the gateway (the next `deal` asks for those after them). */
  private readonly winnersSeen = new Map<string, number[]>();

  constructor(options: RaftInventoryOptions) {
    this.router = new GroupRouter({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 5_000,
      connections: options.connections ?? 32,
    });
    this.commands = new GroupClient(this.router, FLASH_COMMAND_ROUTE);
  }

  async createDeal(spec: DealSpec): Promise<void> {
    if (!this.groupsReady) {
      await this.router.request('flash.admin', 'POST', '/v1/flash/inventory-groups', {}).then((a) => {
        if (a.status >= 300)
          throw new ServiceError(
            a.status,
            'unavailable',
            `inventory groups: ${JSON.stringify(a.body).slice(0, 200)}`,
            a.body,
          );
      });
      this.groupsReady = true;
    }
    const counts = shardCounts(spec.totalInventory, spec.shards);
    // Group 0 last: it holds the deal's record as the gateways read it, so a deal they can see is whole.
    for (const g of groupsOfDeal(spec.shards).reverse()) {
      const shards = counts
        .map((count, shard) => ({ shard, count }))
        .filter((s) => groupOfShard(s.shard) === inventoryGroup(g));
      const result = await this.command(
        inventoryGroup(g),
        {
          op: 'createDeal',
          dealId: spec.dealId,
          skuId: spec.skuId,
          totalInventory: spec.totalInventory,
          startAt: spec.startAt,
          endAt: spec.endAt,
          shardCount: spec.shards,
          shards,
          ...(spec.windowMs === undefined ? {} : { windowMs: spec.windowMs }),
        },
        30_000,
      );
      if (!result.ok) throw new ServiceError(409, result.error, `deal ${spec.dealId}: ${result.error}`, null);
    }
  }

  async dealIds(): Promise<string[]> {
    const group = inventoryGroup(0);
    const answer = await this.router.request(group, 'GET', path(group, '/deals?consistency=serializable'));
    // Before the first deal the groups do not exist yet: no deals.
    if (answer.status === 404) return [];
    return ((ok(answer) as { deals: DealView[] }).deals ?? []).map((d) => d.dealId);
  }

  async deal(dealId: string): Promise<DealSnapshot | null> {
    const seen = this.winnersSeen.get(dealId) ?? [];
    const from = Array.from({ length: INVENTORY_GROUPS }, (_, g) => seen[g] ?? 0);
    const first = await this.view(inventoryGroup(0), dealId, seen[0] ?? 0);
    if (first === null) return null;
    const views = [
      first,
      ...(await Promise.all(
        groupsOfDeal(first.shardCount)
          .slice(1)
          .map((g) => this.view(inventoryGroup(g), dealId, seen[g] ?? 0)),
      )),
    ];
    const alive: number[] = [];
    const winners: DealSnapshot['winners'] = [];
    let remaining = 0;
    let winnersComplete = true;
    views.forEach((v, g) => {
      if (v === null) return;
      alive.push(...v.alive);
      remaining += v.remaining;
      for (const [userId, reservationId, expiresAt] of v.winners ?? [])
        winners.push({ userId, reservationId, expiresAt });
      // Concurrent calls asked from the same offsets: keep the furthest, never count a batch twice.
      seen[g] = Math.max(seen[g] ?? 0, from[g]! + (v.winners?.length ?? 0));
      if (v.total !== undefined && from[g]! + (v.winners?.length ?? 0) < v.total) winnersComplete = false;
    });
    if (this.winnersSeen.size > 10_000) this.winnersSeen.clear();
    this.winnersSeen.set(dealId, seen);
    return {
      dealId,
      skuId: first.skuId,
      totalInventory: first.totalInventory,
      startAt: first.startAt,
      endAt: first.endAt,
      shards: first.shardCount,
      // The deal's record is group 0's: its go-live entry is the broadcast the gateways trust.
      liveAt: first.liveAt,
      alive: alive.sort((a, b) => a - b),
      remaining,
      winners,
      winnersComplete,
    };
  }

  async goLive(dealId: string): Promise<void> {
    const first = await this.view(inventoryGroup(0), dealId);
    if (first === null) throw new ServiceError(404, 'deal_not_found', `no deal ${dealId}`, null);
    await Promise.all(
      groupsOfDeal(first.shardCount).map((g) => this.command(inventoryGroup(g), { op: 'goLive', dealId })),
    );
  }

  async reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const result = await this.command(groupOfShard(request.shard), { op: 'reserve', ...request });
    if (!result.ok) return { outcome: 'refused', error: result.error };
    if (result.op !== 'reserve') throw new Error(`unexpected answer to reserve: ${result.op}`);
    if (result.outcome === 'won') return { outcome: 'won', reservation: result.reservation };
    return { outcome: 'lost', shard: result.shard, shardEmpty: result.shardEmpty, reroute: result.reroute };
  }

  pay(reservationId: string, userId: string, paymentId: string): Promise<ReservationChange> {
    return this.change(reservationId, { op: 'pay', reservationId, userId, paymentId });
  }

  cancel(reservationId: string, userId: string): Promise<ReservationChange> {
    return this.change(reservationId, { op: 'cancel', reservationId, userId });
  }

  async reservation(reservationId: string): Promise<ReservationView | null> {
    const shard = shardOfReservation(reservationId);
    if (shard === null) return null;
    const answer = await this.router.request(
      groupOfShard(shard),
      'GET',
      path(groupOfShard(shard), `/reservations/${encodeURIComponent(reservationId)}`),
    );
    if (answer.status === 404) return null;
    return ok(answer) as ReservationView;
  }

  async attempt(dealId: string, userId: string, key: string): Promise<AttemptRecord | null> {
    const first = await this.view(inventoryGroup(0), dealId);
    if (first === null) return null;
    const q = `?user=${encodeURIComponent(userId)}&key=${encodeURIComponent(key)}`;
    const records = await Promise.all(
      groupsOfDeal(first.shardCount).map(async (g) => {
        const answer = await this.router.request(
          inventoryGroup(g),
          'GET',
          path(inventoryGroup(g), `/deals/${encodeURIComponent(dealId)}/attempts${q}`),
        );
        return answer.status === 404 ? null : (ok(answer) as AttemptRecord);
      }),
    );
    return (
      records.find((r) => r?.status === 'won') ?? records.find((r) => r?.status === 'lost') ?? { status: 'unknown' }
    );
  }

  async probe(dealId: string, shard: number): Promise<{ remaining: number }> {
    const view = await this.view(groupOfShard(shard), dealId);
    return { remaining: view?.shards.find((s) => s.shard === shard)?.remaining ?? 0 };
  }

  close(): Promise<void> {
    return this.router.close();
  }

  /** A group's view of a deal from its leader's local copy (the gateways' refresh: a hint, not a decision). */
  private async view(
    group: string,
    dealId: string,
    winnersFrom?: number,
  ): Promise<(DealView & { winners?: Array<[string, string, number]>; total?: number }) | null> {
    const from = winnersFrom === undefined ? '' : `&winners_from=${winnersFrom}`;
    const answer = await this.router.request(
      group,
      'GET',
      path(group, `/deals/${encodeURIComponent(dealId)}?consistency=serializable${from}`),
    );
    if (answer.status === 404) return null;
    return ok(answer) as DealView & { winners?: Array<[string, string, number]>; total?: number };
  }

  private async change(reservationId: string, command: FlashCommand): Promise<ReservationChange> {
    const shard = shardOfReservation(reservationId);
    if (shard === null) return { ok: false, error: 'unknown_reservation' };
    const result = await this.command(groupOfShard(shard), command);
    if (!result.ok) return { ok: false, error: result.error };
    if (result.op !== 'pay' && result.op !== 'cancel') throw new Error(`unexpected answer: ${result.op}`);
    return { ok: true, reservation: result.reservation };
  }

  /**
   * One command through a group's log. A group the meta group has not started yet answers 404 group_not_found for
   * a moment after it is created: retried until `patienceMs`.
   */
  private async command(group: string, command: FlashCommand, patienceMs = 0): Promise<FlashResult> {
    const deadline = Date.now() + patienceMs;
    for (;;) {
      const answer = await this.commands.request(group, command);
      const code = (answer.body as { error?: { code?: string } } | null)?.error?.code;
      if (answer.status === 404 && code === 'group_not_found' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      return ok(answer) as FlashResult;
    }
  }
}

function ok(answer: { status: number; body: unknown }): unknown {
  if (answer.status < 300) return answer.body;
  const err = (answer.body as { error?: { code?: string; message?: string } } | null)?.error;
  throw new ServiceError(answer.status, err?.code ?? 'unknown', err?.message ?? `HTTP ${answer.status}`, answer.body);
}
