/**
 * The collaborative editor as a grouped service. Members run the op-log groups (`collab.0` .. `collab.{G-1}`, each a
 * CollabMachine serving a range of hash slots of doc ids) and serve internal endpoints (cluster token only) that the
 * workers call through a GroupRouter; workers (src/workers/editor/worker.ts) serve users: HTTP, the editor page and the WebSocket.
 */
import type { ManagedGroupOptions, RaftNode } from '@raftkit/raft';
import {
  badRequest,
  type ServiceContext,
  HttpError,
  notFound,
  requireInteger,
  requireObject,
  type ServiceDefinition,
  type OnRequestKind,
  type RequestContext,
} from '@raftkit/http';
import { AppendOrder } from './append-order.js';
import { COLLAB_COMMAND_ROUTE, COLLAB_GROUPS, DEFAULT_GROUPS, GROUP_PREFIX, MAX_GROUPS } from '../placement.js';
import { checkCommand } from '../commands.js';
import { CollabMachine, type CollabCommand, type CollabResult } from '../machine.js';
import { startCollabWorker } from '../workers/editor/worker.js';

type CollabNode = RaftNode<CollabCommand, CollabResult, CollabMachine>;

/** How often each member proposes `compact` to the groups it leads (idle snapshots, hot-log trimming). */
const COMPACT_EVERY_MS = 60_000;

/**
 * The op-log groups: a CollabMachine each, on the cluster's replica count of processes (3 unless `cluster up --set replicas=5`;
 * fewer while fewer are live).
 */
const OP_LOG_KIND: OnRequestKind = {
  name: 'op-log',
  provisioning: 'on request',
  includes: (name) => COLLAB_GROUPS.includes(name),
  groupOptions: () => ({ stateMachine: new CollabMachine() as unknown as ManagedGroupOptions['stateMachine'] }),
};

export function createCollabService(): ServiceDefinition {
  return {
    name: 'collab',
    kinds: [OP_LOG_KIND],
    routes: (service) => collabRoutes(service),
    workers: [{ role: 'worker', count: 3, start: startCollabWorker }],
  };
}

function collabRoutes(service: ServiceContext): void {
  const managed = service.managed;
  const order = new AppendOrder();
  const proposed = service.metrics.counter(
    'collab_commands_total',
    'Commands proposed to op-log groups through this member',
  );

  const compact = setInterval(() => {
    for (const record of managed.catalog().groupsWithPrefix(GROUP_PREFIX)) {
      const node = managed.group<CollabCommand, CollabResult, CollabMachine>(record.name);
      if (node === undefined || node.leaderId !== managed.id) continue;
      if (node.readLocal((m) => m.docIds().length) === 0) continue;
      node.propose({ op: 'compact' }).catch(() => undefined);
    }
  }, COMPACT_EVERY_MS);
  compact.unref();
  service.onStop(() => clearInterval(compact));

  const groupOf = (ctx: RequestContext): CollabNode => {
    const name = ctx.params.group ?? '';
    if (!name.startsWith(GROUP_PREFIX)) throw badRequest('invalid_group', 'not a collab group', { field: 'group' });
    return service.requireGroup<CollabCommand, CollabResult, CollabMachine>(ctx, name) as CollabNode;
  };

  service.commandRoute<CollabCommand, CollabResult>(COLLAB_COMMAND_ROUTE, {
    admits: 'cluster',
    check: (body) => {
      checkCommand(body);
      return body;
    },
    group: (ctx) => groupOf(ctx),
    propose: (ctx, _node, command, write) => {
      proposed.inc();
      // A session's appends are proposed in their sequence order (they may arrive out of it over several sockets).
      if (command.op === 'append' && command.session !== undefined && command.seq !== undefined) {
        return order.run(`${ctx.params.group}/${command.doc_id}/${command.session}`, command.seq, write);
      }
      return write();
    },
  });

  service.router
    // Creates the op-log groups once (idempotent: a second call finds them). Workers call it at start.
    .post('/v1/collab/setup', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const groups =
        body.groups === undefined ? DEFAULT_GROUPS : requireInteger(body, 'groups', { min: 1, max: MAX_GROUPS });
      const existing = managed.catalog().groupsWithPrefix(GROUP_PREFIX);
      if (existing.length > 0) return { groups: existing.map((g) => g.name), created: false };
      const { result, replicas } = await service.createGroups(OP_LOG_KIND, COLLAB_GROUPS.records(groups));
      if (!result.ok) {
        if (result.code === 'exists')
          return {
            groups: managed
              .catalog()
              .groupsWithPrefix(GROUP_PREFIX)
              .map((g) => g.name),
            created: false,
          };
        throw new HttpError(503, 'unavailable', result.message, {}, { 'retry-after': '1' });
      }
      return { groups: result.groups.map((g) => g.name), created: true, replicas };
    })
    .get('/v1/collab/groups/:group/docs/:doc', { admits: 'cluster' }, async (ctx) => {
      const node = groupOf(ctx);
      const doc = ctx.params.doc ?? '';
      const view = ctx.query.get('view') ?? 'meta';
      const user = ctx.query.get('user');
      const sinceText = ctx.query.get('since');
      const since = sinceText === null || !/^\d{1,15}$/.test(sinceText) ? null : Number(sinceText);
      const limitText = ctx.query.get('limit');
      const limit = limitText === null || !/^\d{1,9}$/.test(limitText) ? null : Number(limitText);
      // Linearizable: an owner loading a document, or a permission check, must see every committed change.
      const answer = await service.call(node, () =>
        node.read((m) => {
          const meta = m.meta(doc);
          if (meta === null) return null;
          const role = user === null ? null : m.role(doc, user);
          switch (view) {
            case 'state': {
              let s = m.state(doc, since)!;
              // With a limit, the caller wants the latest changes held even when `since` is older than the hot log.
              if (s.changes === null && limit !== null) s = m.state(doc, s.log_start)!;
              // An owner loading a document wants only the latest changes (for reconnects), not 7 days of them.
              const changes = s.changes !== null && limit !== null ? s.changes.slice(-limit) : s.changes;
              return {
                meta,
                role,
                owner: m.owner(doc),
                content: Buffer.from(s.content).toString('base64'),
                changes,
                log_start: s.log_start,
                log: m.logInfo(doc),
              };
            }
            case 'comments':
              return { meta, role, comments: m.comments(doc) };
            case 'snapshots':
              return { meta, role, snapshots: m.snapshots(doc) };
            case 'text':
              return { meta, role, text: m.text(doc) };
            default:
              return { meta, role, owner: m.owner(doc), permissions: m.permissions(doc), log: m.logInfo(doc) };
          }
        }),
      );
      if (answer === null) throw notFound(`no document ${doc}`, { doc_id: doc });
      return answer;
    })
    .get('/v1/collab/groups/:group/docs', { admits: 'cluster' }, async (ctx) => {
      const node = groupOf(ctx);
      const user = ctx.query.get('user');
      return { docs: await service.call(node, () => node.read((m) => m.list(user))) };
    });
}
