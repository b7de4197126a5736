/** HTTP endpoints of the lock service. The contract (statuses, bodies, decisions) is in README.md. */
import { v4 as uuidv4 } from 'uuid';
import {
  badRequest,
  conflict,
  HttpError,
  optionalBoolean,
  BUSY_WRITERS,
  Reply,
  requireObject,
  type JsonObject,
  type RequestContext,
  type ServiceContext,
  type ServiceDefinition,
  parseJsonBody,
} from '@raftkit/http';
import { LockBatcher } from './batch.js';
import { startExpiry } from './expiry.js';
import { LockMachine, type BatchableCommand, type LockCommand, type LockResult } from '../machine.js';
import { changeBody, DEFAULT_WATCH_LIMITS, lockBody, WatchHub } from './watch.js';

export const LOCK_NAME = /^[A-Za-z0-9._:/-]{1,255}$/;
export const DEFAULT_TIMEOUT_MS = 10_000;
const MIN_TIMEOUT_MS = 1_000;
const MAX_TIMEOUT_MS = 300_000;
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MAX_WATCH_MS = 60_000;

function lockName(ctx: RequestContext): string {
  const name = ctx.params.name ?? '';
  if (!LOCK_NAME.test(name)) {
    throw badRequest('invalid_name', 'a lock name is 1 to 255 characters of A-Z a-z 0-9 . _ : / -', { field: 'name' });
  }
  return name;
}

function sessionId(value: unknown, field = 'session_id'): string {
  if (typeof value !== 'string' || !SESSION_ID.test(value)) {
    throw badRequest('invalid_field', `${field} must be a session id from POST /v1/sessions`, { field });
  }
  return value;
}

function fencingToken(body: JsonObject): number | null {
  const v = body.fencing_token;
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw badRequest('invalid_field', 'fencing_token must be the positive integer from the grant', {
      field: 'fencing_token',
    });
  }
  return v;
}

/** Turn a refused command into its HTTP error. */
function refused(result: LockResult): never {
  if (result.ok) throw new Error('not a refusal');
  switch (result.error) {
    case 'unknown_session':
      throw new HttpError(404, 'unknown_session', 'no such session: it expired, was closed, or never existed');
    case 'session_forbidden':
      throw new HttpError(403, 'session_forbidden', 'this session was opened with another token');
    case 'stale_token':
      throw conflict('stale_token', 'the fencing token does not match the current grant', {
        current_token: result.token ?? null,
      });
    case 'not_holder':
      throw conflict('not_holder', 'this session neither holds the lock nor waits for it');
  }
}

export function lockRoutes(service: ServiceContext<LockCommand, LockResult>): void {
  /** The service's one group (its kind provisioned as 'one group'). */
  const group = service.group();
  const machine = group.machine as LockMachine;
  const dropped = service.metrics.counter(
    'lock_watchers_dropped_total',
    'Watch streams dropped because their client did not read',
  );
  const hub = new WatchHub(DEFAULT_WATCH_LIMITS, () => dropped.inc());
  service.metrics
    .gauge('lock_watchers', 'Watches (long polls and streams) open on this member')
    .set(() => hub.watchers);
  machine.onChange = hub.publish;
  machine.watched = hub.watches;
  service.onStop(startExpiry(service, machine));
  service.onStop(() => hub.close());
  const owner = (ctx: RequestContext): string => service.principal(ctx).hash;
  const batcher = new LockBatcher();
  const propose = (command: LockCommand): Promise<LockResult> => group.node.propose(command);
  service.metrics
    .gauge('lock_batched_entries', 'Raft entries proposed by the acquire/release batcher on this member')
    .set(() => batcher.entries);
  service.metrics
    .gauge('lock_batched_commands', 'Acquires and releases those entries carried')
    .set(() => batcher.commands);
  /** An acquire or release through the turn's batch (an idempotent one goes alone: ServiceGroup.write). */
  const write = (ctx: RequestContext, command: BatchableCommand): Promise<LockResult> =>
    group.write(command, ctx, () => batcher.submit(propose, command));

  service.router
    .post('/v1/sessions', { admits: 'authenticated' }, async (ctx) => {
      const text = await ctx.text();
      const body = text.trim().length === 0 ? {} : requireObject(parseJsonBody(text));
      const timeout = body.timeout_ms ?? DEFAULT_TIMEOUT_MS;
      if (
        typeof timeout !== 'number' ||
        !Number.isSafeInteger(timeout) ||
        timeout < MIN_TIMEOUT_MS ||
        timeout > MAX_TIMEOUT_MS
      ) {
        throw badRequest('invalid_field', `timeout_ms must be an integer from ${MIN_TIMEOUT_MS} to ${MAX_TIMEOUT_MS}`, {
          field: 'timeout_ms',
        });
      }
      const result = await group.write(
        {
          op: 'openSession',
          id: uuidv4(),
          timeoutMs: timeout,
          owner: owner(ctx),
        },
        ctx,
      );
      if (!result.ok || result.op !== 'openSession') refused(result);
      return new Reply(201, {
        session_id: result.id,
        timeout_ms: result.timeoutMs,
        heartbeat_ms: Math.floor(result.timeoutMs / 3),
      });
    })
    .post('/v1/sessions/:id/heartbeat', { admits: 'authenticated' }, async (ctx) => {
      const id = sessionId(ctx.params.id, 'id');
      const result = await group.write({ op: 'heartbeat', id, owner: owner(ctx) }, ctx);
      if (!result.ok || result.op !== 'heartbeat') refused(result);
      // The write may have been answered from the leader's result before this member applied it.
      await group.ownWritesApplied();
      return { session_id: id, timeout_ms: machine.getSession(id)?.timeoutMs ?? null };
    })
    .get('/v1/sessions/:id', { admits: 'authenticated' }, async (ctx) => {
      const id = sessionId(ctx.params.id, 'id');
      await group.readBarrier(ctx);
      const s = machine.getSession(id);
      if (s === null)
        throw new HttpError(404, 'unknown_session', 'no such session: it expired, was closed, or never existed');
      if (s.owner !== owner(ctx))
        throw new HttpError(403, 'session_forbidden', 'this session was opened with another token');
      return { session_id: id, timeout_ms: s.timeoutMs, owned_locks: s.owned, waiting_for: s.waiting };
    })
    .delete('/v1/sessions/:id', { admits: 'authenticated' }, async (ctx) => {
      const id = sessionId(ctx.params.id, 'id');
      const result = await group.write({ op: 'closeSession', id, owner: owner(ctx) }, ctx);
      if (!result.ok || result.op !== 'closeSession') refused(result);
      return { session_id: id, closed: true, released_locks: result.released };
    })
    .post('/v1/locks/:name/acquire', { admits: 'authenticated' }, async (ctx) => {
      const name = lockName(ctx);
      const body = requireObject(await ctx.json());
      const session = sessionId(body.session_id);
      const wait = optionalBoolean(body, 'wait', false);
      const result = await write(ctx, { op: 'acquire', name, session, owner: owner(ctx), wait });
      if (!result.ok || result.op !== 'acquire') refused(result);
      if (result.granted) return { granted: true, fencing_token: result.token };
      return result.position === null
        ? { granted: false }
        : { granted: false, queued: true, position: result.position };
    })
    .post('/v1/locks/:name/release', { admits: 'authenticated' }, async (ctx) => {
      const name = lockName(ctx);
      const body = requireObject(await ctx.json());
      const session = sessionId(body.session_id);
      const token = fencingToken(body);
      const result = await write(ctx, { op: 'release', name, session, owner: owner(ctx), token });
      if (!result.ok || result.op !== 'release') refused(result);
      return result.dequeued
        ? { released: false, dequeued: true }
        : { released: true, next_holder_granted: result.next !== null };
    })
    .get('/v1/locks/:name', { admits: 'authenticated' }, async (ctx) => {
      const name = lockName(ctx);
      await group.readBarrier(ctx);
      return lockBody(machine.getLock(name));
    })
    .get('/v1/locks/:name/watch', { admits: 'authenticated' }, async (ctx) => {
      const name = lockName(ctx);
      const sessionParam = ctx.query.get('session_id');
      const filter = { session: sessionParam === null ? null : sessionId(sessionParam) };
      const afterText = ctx.query.get('after_revision');
      const after = afterText === null ? null : Number(afterText);
      if (after !== null && (!Number.isSafeInteger(after) || after < 0)) {
        throw badRequest('invalid_query', 'after_revision must be a non-negative integer', { field: 'after_revision' });
      }
      const timeoutText = ctx.query.get('timeout_ms') ?? '30000';
      const timeoutMs = Number(timeoutText);
      if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_WATCH_MS) {
        throw badRequest('invalid_query', `timeout_ms must be an integer from 0 to ${MAX_WATCH_MS}`, {
          field: 'timeout_ms',
        });
      }
      const current = machine.getLock(name);
      if ((ctx.req.headers.accept ?? '').includes('text/event-stream') || ctx.query.get('stream') === 'true') {
        hub.stream(name, filter, ctx.res, current);
        return;
      }
      // A change already past the caller's revision answers at once (no missed wake-ups between polls).
      if (
        after !== null &&
        current.revision > after &&
        (filter.session === null || current.holder === filter.session)
      ) {
        return { changed: true, lock: lockBody(current) };
      }
      const change = await hub.next(name, filter, timeoutMs);
      if (change === null) return { changed: false, lock: lockBody(machine.getLock(name)) };
      return { changed: true, ...changeBody(change) };
    });
}

export const lockService: ServiceDefinition<LockCommand, LockResult> = {
  name: 'lock',
  // Paced writes, forwarded results, one GC thread (README.md "Write pacing", "Forwarded results", "Garbage collection on one thread").
  kinds: [
    {
      name: 'lock',
      provisioning: 'one group',
      createMachine: () => new LockMachine(),
      raft: BUSY_WRITERS.raft,
      replicas: 'every member',
    },
  ],
  routes: lockRoutes,
  memberNodeFlags: BUSY_WRITERS.memberNodeFlags,
};
