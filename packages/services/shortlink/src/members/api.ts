/**
 * The link store's endpoints on the Raft members. Only application servers call them (cluster token only):
 * leases of id batches and creates go through the log (committed on a majority before the answer); lookups are
 * local reads through the member's shared cache, with no consensus on the redirect path.
 */
import {
  badRequest,
  conflict,
  HttpError,
  notFound,
  Reply,
  requireObject,
  requireString,
  type JsonObject,
  type RequestContext,
  type ServiceContext,
} from '@raftkit/http';
import { ALIAS, GENERATED_CODE } from '../codes.js';
import { parseLongUrl, shortCodeParam, USER } from '../input.js';
import type { LinkMachine, CreateSpec, Link, LinkCommand, LinkResult } from '../machine.js';
import { purgeOptions, startPurge } from './purge.js';
import { SharedCache } from './shared-cache.js';

/** What GET /internal/links/:code answers: the link with times in epoch milliseconds. */
export interface LinkRecord {
  short_code: string;
  long_url: string;
  created_at: number;
  expires_at: number;
  created_by: string;
  alias: boolean;
}

/** Links in one POST /internal/link-batches (app servers send at most 256). */
export const MAX_BATCH_LINKS = 1000;

/** One link's answer in POST /internal/link-batches. */
export type BatchItemResult =
  | { status: 'created'; link: LinkRecord }
  | { status: 'retried'; link: LinkRecord }
  | { status: 'taken' }
  | { status: 'not_leased' }
  | { status: 'invalid'; error: Record<string, unknown> };

function linkRecord(code: string, link: Link): LinkRecord {
  return {
    short_code: code,
    long_url: link.long_url,
    created_at: link.created_at,
    expires_at: link.expires_at,
    created_by: link.created_by,
    alias: link.alias,
  };
}

function requireCluster(service: ServiceContext<LinkCommand, LinkResult>, ctx: RequestContext): void {
  if (service.principal(ctx).kind !== 'cluster')
    throw new HttpError(403, 'forbidden', 'the link store is for application servers (cluster token)');
}

function timestamp(body: JsonObject, field: string): number {
  const v = body[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw badRequest('invalid_field', `${field} must be epoch milliseconds`, { field });
  return v;
}

function parseCreateSpec(body: JsonObject): CreateSpec {
  if (typeof body.alias !== 'boolean')
    throw badRequest('invalid_field', 'alias must be true or false', { field: 'alias' });
  const alias = body.alias;
  const code = requireString(body, 'code', { pattern: alias ? ALIAS : GENERATED_CODE });
  const created_at = timestamp(body, 'created_at');
  const expires_at = timestamp(body, 'expires_at');
  if (expires_at <= created_at)
    throw badRequest('invalid_field', 'expires_at must be after created_at', { field: 'expires_at' });
  return {
    code,
    long_url: parseLongUrl(body.long_url),
    created_at,
    expires_at,
    created_by: requireString(body, 'created_by', { pattern: USER }),
    alias,
  };
}

/** Each link of a batch on its own: a malformed one is answered `invalid` and the others still go through. */
function parseBatch(body: JsonObject): Array<CreateSpec | { invalid: HttpError }> {
  const links = body.links;
  if (!Array.isArray(links) || links.length === 0 || links.length > MAX_BATCH_LINKS) {
    throw badRequest('invalid_field', `links must be an array of 1 to ${MAX_BATCH_LINKS} links`, { field: 'links' });
  }
  return links.map((item: unknown) => {
    try {
      return parseCreateSpec(requireObject(item));
    } catch (error) {
      if (error instanceof HttpError && error.status === 400) return { invalid: error };
      throw error;
    }
  });
}

export function linkRoutes(service: ServiceContext<LinkCommand, LinkResult>): void {
  /** The service's one group (its kind provisioned as 'one group'). */
  const group = service.group();
  const machine = group.machine as LinkMachine;
  const cache = new SharedCache();
  machine.onChange = cache.onChange;
  const lookups = service.metrics.counter(
    'shortlink_store_lookups_total',
    'Link lookups on this member by shared-cache result',
  );
  service.metrics.gauge('shortlink_shared_cache_entries', 'Entries in the shared read cache').set(() => cache.size);
  service.metrics
    .gauge('shortlink_links', 'Links in the store, deleted and expired ones not yet purged included')
    .set(() => machine.size);
  service.metrics
    .gauge('shortlink_retired_aliases', 'Purged aliases kept so they are never claimed again')
    .set(() => machine.retiredCount);
  const purged = service.metrics.counter('shortlink_purged_total', 'Dead links this member purged while leading');
  service.onStop(startPurge(service, machine, purgeOptions(process.env), (count) => purged.inc(count)));

  service.router
    .post('/internal/leases', { admits: 'cluster' }, async (ctx) => {
      requireCluster(service, ctx);
      const body = requireObject(await ctx.json());
      const server = requireString(body, 'server', { minLength: 1, maxLength: 64 });
      const result = await group.write({ op: 'lease', server }, ctx);
      if (!result.ok)
        throw new HttpError(507, 'ids_exhausted', 'every id of the 7-character code space has been leased');
      if (result.op !== 'lease') throw new Error(`unexpected result ${result.op}`);
      return new Reply(201, { start: result.start, end: result.end });
    })
    .post('/internal/links', { admits: 'cluster' }, async (ctx) => {
      requireCluster(service, ctx);
      const command = { op: 'create' as const, ...parseCreateSpec(requireObject(await ctx.json())) };
      const result = await group.write(command, ctx);
      if (!result.ok) {
        if (result.error === 'taken')
          throw conflict('code_taken', `the short code ${command.code} is already taken`, { field: 'custom_alias' });
        throw conflict('not_leased', `the generated code ${command.code} does not come from a leased id`, {
          field: 'code',
        });
      }
      if (result.op !== 'create') throw new Error(`unexpected result ${result.op}`);
      return new Reply(result.retried ? 200 : 201, linkRecord(command.code, result.link));
    })
    .post('/internal/link-batches', { admits: 'cluster' }, async (ctx) => {
      requireCluster(service, ctx);
      const parsed = parseBatch(requireObject(await ctx.json()));
      const links = parsed.filter((p): p is CreateSpec => !('invalid' in p));
      const result = links.length === 0 ? null : await group.write({ op: 'create_many', links }, ctx);
      if (result !== null && (!result.ok || result.op !== 'create_many'))
        throw new Error(`unexpected result ${JSON.stringify(result)}`);
      const outcomes = result?.results ?? [];
      let next = 0;
      const results = parsed.map((p): BatchItemResult => {
        if ('invalid' in p) return { status: 'invalid', error: p.invalid.body().error };
        const outcome = outcomes[next++]!;
        return outcome.status === 'created' || outcome.status === 'retried'
          ? { status: outcome.status, link: linkRecord(p.code, outcome.link) }
          : outcome;
      });
      return { results };
    })
    .get('/internal/links/:code', { admits: 'cluster' }, async (ctx) => {
      requireCluster(service, ctx);
      const code = shortCodeParam(ctx.params.code);
      const local = (ctx.query.get('consistency') ?? 'serializable') === 'serializable';
      const now = Date.now();
      if (local) {
        const cached = cache.get(code);
        lookups.inc(1, { result: cached === undefined ? 'miss' : 'hit' });
        if (cached !== undefined) {
          ctx.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(cached) });
          ctx.res.end(cached);
          return;
        }
      } else {
        await group.readBarrier(ctx);
      }
      const link = machine.get(code);
      if (link === null || link.deleted_at !== null || link.expires_at <= now)
        throw notFound(`no link ${code} (never created, expired or deleted)`, { field: 'short_code' });
      const text = JSON.stringify(linkRecord(code, link));
      if (local) cache.set(code, text, link.expires_at, now);
      ctx.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      ctx.res.end(text);
    })
    .delete('/internal/links/:code', { admits: 'cluster' }, async (ctx) => {
      requireCluster(service, ctx);
      const code = shortCodeParam(ctx.params.code);
      const body = requireObject(await ctx.json());
      const by = body.by;
      if (by !== null && (typeof by !== 'string' || !USER.test(by))) {
        throw badRequest('invalid_field', 'by must be the deleting user, or null for the cluster', { field: 'by' });
      }
      const result = await group.write({ op: 'delete', code, by }, ctx);
      if (!result.ok) {
        if (result.error === 'forbidden')
          throw new HttpError(403, 'forbidden', 'only the creator of a link may delete it');
        throw notFound(`no link ${code}`, { field: 'short_code' });
      }
      if (result.op !== 'delete') throw new Error(`unexpected result ${result.op}`);
      return { short_code: code, deleted: true };
    });
}
