/**
 * A worker's way to the op log: commands and reads about a document go to the leader of the group serving its
 * doc_id (GroupRouter: hash slot -> group -> leader, retried through elections until the deadline).
 */
import { GroupClient, GroupRouter, ServiceError } from '@raftkit/http';
import type {
  CollabCommand,
  CollabResult,
  ChangeEntry,
  Comment,
  DocMeta,
  NamedSnapshot,
  Owner,
  Role,
} from '../../machine.js';
import { COLLAB_COMMAND_ROUTE, DEFAULT_GROUPS } from '../../placement.js';

export interface DocView {
  meta: DocMeta;
  role: Role | null;
  owner: Owner | null;
  permissions: Array<{ user: string; role: Role }>;
}

export interface StateView {
  meta: DocMeta;
  role: Role | null;
  owner: Owner | null;
  content: string;
  changes: ChangeEntry[] | null;
  log_start: number;
}

export class LogAccess {
  readonly router: GroupRouter;
  private readonly commands: GroupClient<CollabCommand, CollabResult>;

  constructor(
    private readonly members: string[],
    private readonly token: string,
    timeoutMs = 15_000,
  ) {
    this.router = new GroupRouter({ endpoints: members, token, timeoutMs });
    this.commands = new GroupClient(this.router, COLLAB_COMMAND_ROUTE);
  }

  /** Creates the op-log groups if they are missing; retried until the members answer. */
  async setup(groups = DEFAULT_GROUPS, deadlineMs = 120_000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    for (let i = 0; ; i++) {
      const url = this.members[i % this.members.length]!;
      try {
        const res = await fetch(`${url}/v1/collab/setup`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ groups }),
        });
        if (res.ok) return;
      } catch {
        // The next member.
      }
      if (Date.now() > deadline) throw new Error('the op-log groups could not be created');
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  async command(docId: string, command: CollabCommand, timeoutMs?: number): Promise<CollabResult> {
    const group = await this.router.groupOf(docId);
    return this.commands.command(group, command, timeoutMs === undefined ? {} : { timeoutMs });
  }

  /** A command about several documents of one group (renew). */
  async groupCommand(group: string, command: CollabCommand): Promise<CollabResult> {
    return this.commands.command(group, command);
  }

  groupOf(docId: string): Promise<string> {
    return this.router.groupOf(docId);
  }

  /** A document's view; null when there is no such document. */
  async read<T>(
    docId: string,
    view: 'meta' | 'state' | 'comments' | 'snapshots' | 'text',
    params: { user?: string; since?: number; limit?: number } = {},
  ): Promise<T | null> {
    const group = await this.router.groupOf(docId);
    const q = new URLSearchParams({ view });
    if (params.user !== undefined) q.set('user', params.user);
    if (params.since !== undefined) q.set('since', String(params.since));
    if (params.limit !== undefined) q.set('limit', String(params.limit));
    try {
      return (await this.router.call(
        group,
        'GET',
        `/v1/collab/groups/${group}/docs/${encodeURIComponent(docId)}?${q}`,
      )) as T;
    } catch (error) {
      if (
        error instanceof ServiceError &&
        error.status === 404 &&
        (error.body as { error?: { code?: string } } | null)?.error?.code === 'not_found'
      )
        return null;
      throw error;
    }
  }

  meta(docId: string, user?: string): Promise<DocView | null> {
    return this.read<DocView>(docId, 'meta', user === undefined ? {} : { user });
  }

  /** The document and the changes after `since` (the last `limit` of them when given). */
  state(docId: string, since?: number, limit?: number): Promise<StateView | null> {
    return this.read<StateView>(docId, 'state', {
      ...(since !== undefined ? { since } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
  }

  /** Every document `user` may read (null: all), from every group. */
  async list(user: string | null, groups: string[]): Promise<DocMeta[]> {
    const q = user === null ? '' : `?user=${encodeURIComponent(user)}`;
    const parts = await Promise.all(
      groups.map(
        async (g) =>
          ((await this.router.call(g, 'GET', `/v1/collab/groups/${g}/docs${q}`)) as { docs: DocMeta[] }).docs,
      ),
    );
    return parts.flat().sort((a, b) => b.last_modified - a.last_modified);
  }

  close(): Promise<void> {
    return this.router.close();
  }
}

export type { Comment, NamedSnapshot };
