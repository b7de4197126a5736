/**
 * The public HTTP API of the editor, served by every worker (README "Endpoints"): users and tokens, documents,
 * named versions and restore, sharing, comments, the worker list, and the editor page with its static files.
 *
 * Auth: a user's token is derived from the cluster token (HMAC, `client.<user_id>.<mac>`), so every worker checks
 * it without shared state; the same user_id always gets the same token. The cluster token may act for any user.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  badRequest,
  deriveClientToken,
  forbidden,
  HttpError,
  notFound,
  Reply,
  requireObject,
  requireString,
  requireWellFormed,
  ServiceError,
  type Principal,
  type RequestContext,
  type Router,
  type WorkerOptions,
} from '@raftkit/http';
import type { Id } from '@raftkit/crdt';
import {
  atLeast,
  DOC_ID,
  MAX_CHARS,
  MAX_COMMENT_CHARS,
  MAX_TITLE_CHARS,
  ROLES,
  USER_ID,
  type CollabCommand,
  type CollabResult,
  type Role,
} from '../../machine.js';
import type { DocView, LogAccess } from './log-access.js';
import type { DocSession } from './session.js';
import { CLOSE_NO_DOC } from '../../protocol.js';

const WEB_DIST = fileURLToPath(new URL('../../../../web/dist/', import.meta.url));
const STATIC_FILE = /^[A-Za-z0-9._-]{1,200}$/;
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
};

/** The log's answer as this worker's answer: its status and error body pass through (503 keeps Retry-After). */
async function viaLog<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ServiceError) {
      const err = (error.body as { error?: { code?: string; message?: string } } | null)?.error;
      throw new HttpError(
        error.status >= 500 ? 503 : error.status,
        err?.code ?? error.code,
        err?.message ?? error.message,
        {},
        error.status >= 500 ? { 'retry-after': '1' } : {},
      );
    }
    throw error;
  }
}

/** A machine failure as an HTTP error. */
function failure(result: CollabResult): never {
  if (result.ok) throw new HttpError(500, 'internal', 'unexpected result');
  if (result.code === 'quota') throw new HttpError(403, 'quota_exceeded', result.message);
  const status =
    result.code === 'no_such_doc' || result.code === 'not_found'
      ? 404
      : result.code === 'exists' || result.code === 'stale_generation'
        ? 409
        : 400;
  throw new HttpError(status, result.code === 'no_such_doc' ? 'not_found' : result.code, result.message);
}

/** The user a request acts as: a user token's user; the cluster token acts as nobody in particular (null). */
function userOf(principal: Principal): string | null {
  return principal.kind === 'client' ? principal.name : null;
}

/**
 * What the editor's HTTP side needs of its worker (EditorWorker is one): declared here so the endpoints do not
 * import the worker that registers them.
 */
interface EditorWorker {
  readonly options: WorkerOptions;
  readonly log: LogAccess;
  readonly settings: { readonly maxDocsPerUser: number };
  readonly sessions: ReadonlyMap<string, DocSession>;
  readonly clusterToken: string;
  groups(): string[];
}

export function collabApi(router: Router, worker: EditorWorker): void {
  const log = worker.log;

  const docIdOf = (ctx: RequestContext): string => {
    const id = ctx.params.doc ?? '';
    if (!DOC_ID.test(id))
      throw badRequest('invalid_doc_id', 'a doc_id is 1..64 of A-Z a-z 0-9 _ -', { field: 'doc_id' });
    return id;
  };

  /** The document and the caller's role, or 404 (also when the caller may not see it: no existence leak). */
  const access = async (
    ctx: RequestContext,
    need: Role,
  ): Promise<{ docId: string; view: DocView; user: string | null }> => {
    const docId = docIdOf(ctx);
    const user = userOf(ctx.principal!);
    const view = await viaLog(() => log.meta(docId, user ?? undefined));
    if (view === null || (user !== null && view.role === null))
      throw notFound(`no document ${docId}`, { doc_id: docId });
    if (user !== null && !atLeast(view.role, need))
      throw forbidden(`this needs the ${need} role; ${user} is ${view.role}`, { role: view.role });
    return { docId, view, user };
  };

  const command = async (docId: string, c: CollabCommand): Promise<CollabResult> => {
    const result = await viaLog(() => log.command(docId, c));
    if (!result.ok) failure(result);
    return result;
  };

  const describe = (view: DocView) => ({
    doc_id: view.meta.doc_id,
    title: view.meta.title,
    owner: view.meta.owner,
    created_at: view.meta.created_at,
    last_modified: view.meta.last_modified,
    revision: view.meta.revision,
    length: view.meta.length,
    ...(view.role !== null ? { role: view.role } : {}),
    // The worker holding the document's lease (it may have just run out), or null when nobody owns it.
    worker: view.owner?.worker ?? null,
  });

  router
    .post('/api/collab/users', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const userId = requireString(body, 'user_id', { pattern: USER_ID });
      return { user_id: userId, user_token: deriveClientToken(worker.clusterToken, userId) };
    })
    .get('/api/collab/workers', { admits: 'authenticated' }, () => ({
      workers: worker.options.workers.map((w) => ({ id: w.id, url: `http://${w.httpAddress}` })),
    }))
    .post('/api/docs', { admits: 'authenticated' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const title = requireString(body, 'title', { minLength: 0, maxLength: MAX_TITLE_CHARS });
      requireWellFormed(title, 'title');
      const owner = requireString(body, 'owner_id', { pattern: USER_ID });
      const user = userOf(ctx.principal!);
      if (user !== null && user !== owner)
        throw forbidden(`a user token creates documents for its own user (${user}), not ${owner}`);
      let template: string | null = null;
      if (body.template !== undefined && body.template !== null) {
        template = requireString(body, 'template', { minLength: 0, maxLength: MAX_CHARS });
        requireWellFormed(template, 'template');
      }
      const docId = await homeDocId(worker, owner);
      await command(docId, {
        op: 'create',
        doc_id: docId,
        title,
        owner,
        template,
        max_docs: worker.settings.maxDocsPerUser,
      });
      return new Reply(201, {
        doc_id: docId,
        title,
        owner,
        revision: template !== null && template.length > 0 ? 1 : 0,
      });
    })
    .get('/api/docs', { admits: 'authenticated' }, async (ctx) => {
      const user = userOf(ctx.principal!) ?? ctx.query.get('user');
      if (user !== null && !USER_ID.test(user))
        throw badRequest('invalid_query', 'user is a user id', { field: 'user' });
      const docs = await viaLog(() => log.list(user, worker.groups()));
      return { docs: docs.map(({ length: _l, ...d }) => d) };
    })
    .get('/api/docs/:doc', { admits: 'authenticated' }, async (ctx) => describe((await access(ctx, 'viewer')).view))
    // The owner (or the cluster token) deletes a document: it is gone from the log's state at once (404 after),
    // its quota slot is free, and its open sockets are closed with 4404 by the worker holding it.
    .delete('/api/docs/:doc', { admits: 'authenticated' }, async (ctx) => {
      const { docId, view, user } = await access(ctx, 'viewer');
      if (user !== null && user !== view.meta.owner) throw forbidden('only the owner deletes a document');
      await command(docId, { op: 'delete', doc_id: docId });
      await closeDeleted(worker, docId, view);
      return { doc_id: docId, deleted: true };
    })
    .get('/api/docs/:doc/text', { admits: 'authenticated' }, async (ctx) => {
      const { docId } = await access(ctx, 'viewer');
      const answer = await viaLog(() => log.read<{ meta: { revision: number }; text: string }>(docId, 'text'));
      if (answer === null) throw notFound(`no document ${docId}`);
      return { doc_id: docId, revision: answer.meta.revision, text: answer.text };
    })
    .post('/api/docs/:doc/snapshots', { admits: 'authenticated' }, async (ctx) => {
      const { docId } = await access(ctx, 'editor');
      const body = requireObject(await ctx.json());
      const name = requireString(body, 'name', { minLength: 1, maxLength: 200 });
      requireWellFormed(name, 'name');
      const result = await command(docId, { op: 'snapshot', doc_id: docId, name });
      if (!result.ok || result.op !== 'snapshot') throw new HttpError(500, 'internal', 'unexpected result');
      return { snapshot_id: result.snapshot_id, revision: result.revision, name };
    })
    .get('/api/docs/:doc/snapshots', { admits: 'authenticated' }, async (ctx) => {
      const { docId } = await access(ctx, 'viewer');
      const answer = await viaLog(() => log.read<{ snapshots: unknown[] }>(docId, 'snapshots'));
      return { snapshots: answer?.snapshots ?? [] };
    })
    .post('/api/docs/:doc/snapshots/:snapshot/restore', { admits: 'authenticated' }, async (ctx) => {
      const { docId, view, user } = await access(ctx, 'editor');
      const snapshotId = ctx.params.snapshot ?? '';
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(snapshotId))
        throw badRequest('invalid_snapshot_id', 'not a snapshot id', { field: 'snapshot_id' });
      const result = await command(docId, {
        op: 'restore',
        doc_id: docId,
        snapshot_id: snapshotId,
        author: user ?? view.meta.owner,
      });
      if (!result.ok || result.op !== 'restore') throw new HttpError(500, 'internal', 'unexpected result');
      await poke(worker, docId, view);
      return { doc_id: docId, snapshot_id: snapshotId, revision: result.revision };
    })
    .put('/api/docs/:doc/permissions/:user', { admits: 'authenticated' }, async (ctx) => {
      const { docId, view, user } = await access(ctx, 'viewer');
      if (user !== null && user !== view.meta.owner) throw forbidden('only the owner shares a document');
      const target = ctx.params.user ?? '';
      if (!USER_ID.test(target))
        throw badRequest('invalid_user_id', 'a user id is 1..64 of A-Z a-z 0-9 . _ -', { field: 'user_id' });
      const body = requireObject(await ctx.json());
      if (!('role' in body))
        throw badRequest('missing_field', 'role is required (viewer, commenter, editor, or null to revoke)', {
          field: 'role',
        });
      const role = body.role;
      if (role !== null && !ROLES.includes(role as Role))
        throw badRequest('invalid_field', 'role must be viewer, commenter, editor or null', { field: 'role' });
      if (target === view.meta.owner)
        throw badRequest('invalid_field', 'the owner is always an editor', { field: 'user_id' });
      await command(docId, { op: 'permission', doc_id: docId, user: target, role: role as Role | null });
      return { doc_id: docId, user_id: target, role };
    })
    .get('/api/docs/:doc/permissions', { admits: 'authenticated' }, async (ctx) => {
      const { view } = await access(ctx, 'viewer');
      return { permissions: view.permissions.map((p) => ({ user_id: p.user, role: p.role })) };
    })
    .post('/api/docs/:doc/comments', { admits: 'authenticated' }, async (ctx) => {
      const { docId, view, user } = await access(ctx, 'commenter');
      const body = requireObject(await ctx.json());
      const start = idField(body, 'start');
      const end = idField(body, 'end');
      const text = requireString(body, 'body', { minLength: 1, maxLength: MAX_COMMENT_CHARS });
      requireWellFormed(text, 'body');
      const result = await command(docId, {
        op: 'comment',
        doc_id: docId,
        author: user ?? view.meta.owner,
        start,
        end,
        body: text,
      });
      if (!result.ok || result.op !== 'comment') throw new HttpError(500, 'internal', 'unexpected result');
      return new Reply(201, result.comment);
    })
    .get('/api/docs/:doc/comments', { admits: 'authenticated' }, async (ctx) => {
      const { docId } = await access(ctx, 'viewer');
      const answer = await viaLog(() => log.read<{ comments: unknown[] }>(docId, 'comments'));
      return { comments: answer?.comments ?? [] };
    })
    .delete('/api/docs/:doc/comments/:comment', { admits: 'authenticated' }, async (ctx) => {
      const { docId, view, user } = await access(ctx, 'commenter');
      const commentId = ctx.params.comment ?? '';
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(commentId))
        throw badRequest('invalid_comment_id', 'not a comment id', { field: 'comment_id' });
      if (user !== null && user !== view.meta.owner) {
        const answer = await viaLog(() =>
          log.read<{ comments: Array<{ comment_id: string; author: string }> }>(docId, 'comments'),
        );
        const comment = answer?.comments.find((c) => c.comment_id === commentId);
        if (comment === undefined) throw notFound(`no comment ${commentId}`);
        if (comment.author !== user) throw forbidden('a comment is deleted by its author or the document owner');
      }
      await command(docId, { op: 'uncomment', doc_id: docId, comment_id: commentId, by: user ?? view.meta.owner });
      return { doc_id: docId, comment_id: commentId, deleted: true };
    })
    // Another worker restored a version of a document this worker owns: read and broadcast it now.
    .post('/internal/collab/docs/:doc/poke', { admits: 'cluster' }, async (ctx) => {
      const docId = docIdOf(ctx);
      const session = worker.sessions.get(docId);
      if (session !== undefined) await session.catchUp();
      return { doc_id: docId, owned: session !== undefined };
    })
    // Another worker deleted a document this worker owns: its clients are closed with 4404.
    .post('/internal/collab/docs/:doc/deleted', { admits: 'cluster' }, (ctx) => {
      const docId = docIdOf(ctx);
      const session = worker.sessions.get(docId);
      session?.end(CLOSE_NO_DOC, 'document deleted');
      return { doc_id: docId, owned: session !== undefined };
    })
    .get('/docs/:doc', { admits: 'open' }, async (ctx) => {
      docIdOf(ctx);
      await sendFile(ctx, 'index.html');
    })
    .get('/static/:file', { admits: 'open' }, async (ctx) => {
      const file = ctx.params.file ?? '';
      if (!STATIC_FILE.test(file) || file.startsWith('.')) throw notFound(`no file ${file}`);
      await sendFile(ctx, file);
    });
}

function idField(body: Record<string, unknown>, field: string): Id {
  const v = body[field];
  if (
    !Array.isArray(v) ||
    v.length !== 2 ||
    typeof v[0] !== 'string' ||
    v[0].length === 0 ||
    v[0].length > 200 ||
    !Number.isSafeInteger(v[1]) ||
    (v[1] as number) < 0
  ) {
    throw badRequest('invalid_field', `${field} is a character id [client, counter]`, { field });
  }
  return [v[0], v[1] as number];
}

/**
 * A doc_id for a new document of `owner` that lands in the owner's home group (the group serving the owner's user id
 * as a key), so all of a user's documents are in one group and its machine counts them exactly for the quota.
 */
async function homeDocId(worker: EditorWorker, owner: string): Promise<string> {
  const home = await viaLog(() => worker.log.groupOf(owner));
  // With G groups, 1 in G random ids lands there: 64 groups (the most) fail 10,000 draws with p < 1e-68.
  for (let i = 0; i < 10_000; i++) {
    const docId = randomBytes(12).toString('base64url');
    if ((await worker.log.groupOf(docId)) === home) return docId;
  }
  throw new HttpError(503, 'unavailable', 'no document id found for this owner; try again', {}, { 'retry-after': '1' });
}

/** Closes the sockets of a deleted document at the worker holding it (this one or another), with 4404. */
async function closeDeleted(worker: EditorWorker, docId: string, view: DocView): Promise<void> {
  const local = worker.sessions.get(docId);
  if (local !== undefined) return local.end(CLOSE_NO_DOC, 'document deleted');
  const owner = view.owner;
  if (owner === null || owner.worker === worker.options.id) return;
  // Best effort: should this fail, the owner's next lease renewal finds the document gone and its clients, on
  // reconnecting, are answered 4404.
  await fetch(`${owner.url}/internal/collab/docs/${encodeURIComponent(docId)}/deleted`, {
    method: 'POST',
    headers: { authorization: `Bearer ${worker.clusterToken}` },
    signal: AbortSignal.timeout(3000),
  }).catch(() => undefined);
}

/** Tells the document's owner (this worker or another) to read what was appended without it. */
async function poke(worker: EditorWorker, docId: string, view: DocView): Promise<void> {
  const local = worker.sessions.get(docId);
  if (local !== undefined) return local.catchUp().catch(() => undefined);
  const owner = view.owner;
  if (owner === null || owner.worker === worker.options.id) return;
  await fetch(`${owner.url}/internal/collab/docs/${encodeURIComponent(docId)}/poke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${worker.clusterToken}` },
    signal: AbortSignal.timeout(3000),
  }).catch(() => undefined);
}

async function sendFile(ctx: RequestContext, file: string): Promise<void> {
  let data: Buffer;
  try {
    data = await readFile(WEB_DIST + file);
  } catch {
    throw notFound(`no file ${file} (the editor page is built into packages/services/collab/web/dist)`);
  }
  ctx.res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': data.length,
    'cache-control': 'no-cache',
  });
  ctx.res.end(data);
}
