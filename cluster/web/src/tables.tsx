/** The members, workers and groups of one cluster, as tables; each member row carries its fault buttons. */
import type { ClusterView, FaultAction, MemberView } from './types.js';
import { bytes, num, percent, rate, ms } from './format.js';

type FaultAsk = (action: FaultAction, member?: string) => void;

const DEAD = new Set(['down', 'removed']);

function canDo(action: FaultAction, m: MemberView): boolean {
  switch (action) {
    case 'kill':
      return !DEAD.has(m.state);
    case 'pause':
      return !DEAD.has(m.state) && m.state !== 'paused';
    case 'resume':
      return m.state === 'paused';
    case 'restart':
      return m.state !== 'removed';
    default:
      return false;
  }
}

/** Why a member shows its state: a slow one's last role and answer time, a silent one's missed polls. */
function stateTitle(m: MemberView): string {
  if (m.state === 'slow')
    return m.latencyMs !== null
      ? `answered its status in ${ms(m.latencyMs)} (last role ${m.role ?? 'unknown'})`
      : `missed ${m.missedPolls} poll(s) in a row; last role ${m.role ?? 'unknown'}`;
  if (m.state === 'down' && m.pid !== null)
    return `its process runs (pid ${m.pid}) but missed ${m.missedPolls} polls in a row`;
  return m.latencyMs === null ? m.state : `${m.state} · status in ${ms(m.latencyMs)}`;
}

export function MembersTable({ cluster, ask, busy }: { cluster: ClusterView; ask: FaultAsk; busy: boolean }) {
  return (
    <table class="grid" data-testid="members">
      <thead>
        <tr>
          <th>member</th>
          <th>state</th>
          <th>term</th>
          <th>leader</th>
          <th>commit</th>
          <th>applied</th>
          <th>lag</th>
          <th>groups led</th>
          <th>pid</th>
          <th>CPU</th>
          <th>memory</th>
          <th>req/s</th>
          <th>p99</th>
          <th>faults</th>
        </tr>
      </thead>
      <tbody>
        {cluster.members.map((m) => (
          <tr key={m.id} data-testid={`member-row-${m.id}`} data-state={m.state} class={`state-${m.state}`}>
            <td class="id" title={`http ${m.httpAddress} · raft ${m.raftAddress}`}>
              {m.id}
            </td>
            <td>
              <span
                class={`badge badge-${m.state}`}
                data-testid={`member-state-${m.id}`}
                data-role={m.role ?? ''}
                title={stateTitle(m)}
              >
                {m.state}
              </span>
              {m.state === 'slow' && (
                <span class="muted" data-testid={`member-slow-${m.id}`}>
                  {' '}
                  {m.role ?? '?'} · {m.latencyMs === null ? `${m.missedPolls} missed` : ms(m.latencyMs)}
                </span>
              )}
            </td>
            <td data-testid={`member-term-${m.id}`}>{num(m.term)}</td>
            <td data-testid={`member-leader-${m.id}`}>{m.leader ?? '–'}</td>
            <td>{num(m.commit)}</td>
            <td>{num(m.applied)}</td>
            <td class={m.lag !== null && m.lag > 0 ? 'warn' : ''}>{num(m.lag)}</td>
            <td>{m.groupsLed}</td>
            <td>{num(m.pid)}</td>
            <td>{percent(m.cpuPercent)}</td>
            <td>{bytes(m.rssBytes)}</td>
            <td>{rate(m.metrics.requestsPerSec)}</td>
            <td>{ms(m.metrics.p99Ms)}</td>
            <td class="actions">
              {(['kill', 'restart', 'pause', 'resume'] as const).map((a) => (
                <button
                  key={a}
                  type="button"
                  class={`fault fault-${a}`}
                  data-testid={`${a}-${m.id}`}
                  disabled={busy || !canDo(a, m)}
                  onClick={() => ask(a, m.id)}
                >
                  {a}
                </button>
              ))}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function WorkersTable({ cluster }: { cluster: ClusterView }) {
  if (cluster.workers.length === 0)
    return (
      <p class="muted" data-testid="workers-none">
        This service has no worker processes.
      </p>
    );
  return (
    <table class="grid" data-testid="workers">
      <thead>
        <tr>
          <th>worker</th>
          <th>role</th>
          <th>alive</th>
          <th>pid</th>
          <th>address</th>
          <th>CPU</th>
          <th>memory</th>
          <th>req/s</th>
          <th>p99</th>
        </tr>
      </thead>
      <tbody>
        {cluster.workers.map((w) => (
          <tr key={w.id} data-testid={`worker-row-${w.id}`} class={w.alive ? '' : 'state-down'}>
            <td class="id">{w.id}</td>
            <td>{w.role}</td>
            <td>
              <span class={`badge badge-${w.alive ? 'follower' : 'down'}`}>{w.alive ? 'up' : 'down'}</span>
            </td>
            <td>{num(w.pid)}</td>
            <td>{w.address}</td>
            <td>{percent(w.cpuPercent)}</td>
            <td>{bytes(w.rssBytes)}</td>
            <td>{rate(w.metrics.requestsPerSec)}</td>
            <td>{ms(w.metrics.p99Ms)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * Groups down, members across: each cell is that member's replica of the group (L for its leader, f follower,
 * c candidate, · not a replica), so a member's column shows every group it holds and which it leads.
 */
export function GroupsTable({ cluster }: { cluster: ClusterView }) {
  const ids = cluster.members.map((m) => m.id);
  const letter = (s: string): string =>
    s === 'leader' ? 'L' : s === 'follower' ? 'f' : s === 'candidate' ? 'c' : s === 'learner' ? 'l' : s.slice(0, 1);
  return (
    <table class="grid groups" data-testid="groups">
      <thead>
        <tr>
          <th>group</th>
          <th>leader</th>
          <th>term</th>
          {ids.map((id) => (
            <th key={id}>{id}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {cluster.groups.map((g) => {
          const byId = new Map(g.members.map((r) => [r.id, r]));
          return (
            <tr key={g.name} data-testid={`group-row-${g.name}`}>
              <td class="id">{g.name}</td>
              <td data-testid={`group-leader-${g.name}`}>
                {g.leader ?? '–'}
                {g.ageMs > 0 && (
                  <span
                    class="muted"
                    data-testid={`group-age-${g.name}`}
                    title="a member missed its groups call: its last list is shown"
                  >
                    {' '}
                    ({Math.round(g.ageMs / 1000)} s old)
                  </span>
                )}
              </td>
              <td>{num(g.term)}</td>
              {ids.map((id) => {
                const r = byId.get(id);
                return (
                  <td
                    key={id}
                    class={r === undefined ? 'muted' : `cell-${r.state}`}
                    title={
                      r === undefined
                        ? 'not a replica'
                        : `${r.state} · commit ${num(r.commit)} · applied ${num(r.applied)}`
                    }
                  >
                    {r === undefined ? '·' : letter(r.state)}
                  </td>
                );
              })}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
