/**
 * The rows `cluster status` and `cluster groups` print, built the same way in both modes (a local data folder,
 * remote endpoints) so that they print the same shapes.
 */
import type { MemberStatus } from './processes.js';

/**
 * /v1/cluster/status of a member; a grouped member (the log) adds the groups it holds and leads, and the replicas
 * it gives a group it creates.
 */
export type GroupedStatus = MemberStatus & { groups?: number; leaders?: number; replicas?: number };

export interface StatusRow {
  id: string;
  pid: number | null;
  role: string;
  term: number | null;
  leader: string | null;
  commit: number | null;
  applied: number | null;
  lag: number | null;
  groups: number | null;
  leaders: number | null;
  /** Replicas per group: a grouped member's count for the groups it creates; a single-group member's voters. */
  replicas: number | null;
  url: string;
}

/** A member's row from its status (null: it did not answer, and `role` says why). `lag` is set by `withLag`. */
export function memberRow(
  id: string,
  pid: number | null,
  s: GroupedStatus | null,
  role: string,
  url: string,
): StatusRow {
  // A grouped member (the log) counts the groups it holds and leads; a single-group member holds one.
  const grouped = typeof s?.groups === 'number';
  return {
    id,
    pid,
    role: s?.role ?? role,
    term: s?.term ?? null,
    leader: s?.leader_id ?? null,
    commit: s?.commit_index ?? null,
    applied: s?.applied_index ?? null,
    lag: null,
    groups: s === null ? null : grouped ? s.groups! : 1,
    leaders: s === null ? null : grouped ? (s.leaders ?? 0) : s.role === 'leader' ? 1 : 0,
    replicas: s === null ? null : grouped ? (s.replicas ?? null) : s.voters.length,
    url,
  };
}

/** Sets each member row's lag: the highest commit index any member reports minus its applied index. */
export function withLag(rows: StatusRow[]): StatusRow[] {
  const maxCommit = Math.max(0, ...rows.map((r) => r.commit ?? 0));
  for (const r of rows) r.lag = r.applied === null ? null : maxCommit - r.applied;
  return rows;
}

export const STATUS_HEADER = [
  'member',
  'pid',
  'role',
  'term',
  'leader',
  'commit',
  'applied',
  'lag',
  'groups',
  'leaders',
  'replicas',
  'url',
];

export function statusCells(r: StatusRow): unknown[] {
  return [r.id, r.pid, r.role, r.term, r.leader, r.commit, r.applied, r.lag, r.groups, r.leaders, r.replicas, r.url];
}

export const GROUPS_HEADER = ['group', 'leader', 'term', 'commit', 'lag', 'replicas', 'members'];

export function groupCells(r: GroupRow): unknown[] {
  return [r.group, r.leader, r.term, r.commit, r.lag, r.replicas, r.members.join(',')];
}

export interface GroupRow {
  group: string;
  leader: string | null;
  term: number | null;
  commit: number | null;
  /** The highest commit index any replica reports minus the lowest applied index: how far the slowest trails. */
  lag: number | null;
  /** Its voters: the count it was created with (or given since by a move of its members). */
  replicas: number;
  members: string[];
  learners: string[];
}

/** One replica of one group, as a grouped member's GET /v1/cluster/groups lists it. */
export interface Replica {
  group: string;
  role: string;
  leader: string | null;
  term: number;
  commit: number;
  applied: number;
  voters: string[];
  learners: string[];
}

/**
 * `groupAnswers`: each reachable member's answer to GET /v1/cluster/groups (status 0 when it did not answer).
 * `statuses`: called only when no member answered 200 there (a single-group service has no such route): each
 * member's GET /v1/cluster/status; the one group is named `single`. The leader's view wins for term and members.
 */
export async function mergeGroupRows(
  groupAnswers: ReadonlyArray<{ status: number; body: unknown }>,
  statuses: () => Promise<ReadonlyArray<MemberStatus | null>>,
  single: string,
): Promise<GroupRow[]> {
  const byGroup = new Map<string, Replica[]>();
  let grouped = false;
  for (const answer of groupAnswers) {
    if (answer.status !== 200) continue;
    grouped = true;
    for (const r of (answer.body as { groups: Replica[] }).groups)
      byGroup.set(r.group, [...(byGroup.get(r.group) ?? []), r]);
  }
  if (!grouped) {
    for (const s of await statuses()) {
      if (s === null) continue;
      const replica = {
        group: single,
        role: s.role,
        leader: s.leader_id,
        term: s.term,
        commit: s.commit_index,
        applied: s.applied_index,
        voters: s.voters,
        learners: s.learners,
      };
      byGroup.set(single, [...(byGroup.get(single) ?? []), replica]);
    }
  }
  const rows: GroupRow[] = [];
  for (const [group, replicas] of byGroup) {
    const term = Math.max(...replicas.map((r) => r.term));
    const lead = replicas.find((r) => r.role === 'leader' && r.term === term) ?? null;
    const view = lead ?? replicas.find((r) => r.term === term)!;
    const commit = Math.max(...replicas.map((r) => r.commit));
    rows.push({
      group,
      leader: lead?.leader ?? (replicas.every((r) => r.leader === view.leader && r.term === term) ? view.leader : null),
      term,
      commit,
      lag: commit - Math.min(...replicas.map((r) => r.applied)),
      replicas: view.voters.length,
      members: [...view.voters].sort(),
      learners: [...view.learners].sort(),
    });
  }
  return rows.sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
}
