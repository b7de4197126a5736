/** The cluster's timeline (leader changes, elections, snapshots, faults, ups and downs), newest first. */
import type { EventKind, JepsenRun, TimelineEvent } from './types.js';
import { clock } from './format.js';

const SHOWN = 300;

export function Timeline({
  events,
  kinds,
  toggle,
}: {
  events: TimelineEvent[];
  kinds: ReadonlySet<EventKind>;
  toggle: (k: EventKind) => void;
}) {
  const all: EventKind[] = ['fault', 'leader', 'election', 'snapshot', 'up', 'down'];
  const shown = events
    .filter((e) => kinds.has(e.kind))
    .slice(-SHOWN)
    .reverse();
  return (
    <div>
      <div class="filters">
        {all.map((k) => (
          <label key={k} class={`kind kind-${k}`}>
            <input type="checkbox" checked={kinds.has(k)} onChange={() => toggle(k)} /> {k}
          </label>
        ))}
      </div>
      <ol class="timeline" data-testid="timeline">
        {shown.length === 0 && <li class="muted">no events yet</li>}
        {shown.map((e) => (
          <li key={e.seq} data-testid={`event-${e.seq}`} data-kind={e.kind} class={`kind-${e.kind}`}>
            <time>{clock(e.at)}</time>
            <span class="kind-tag">{e.kind}</span>
            {e.member !== null && <span class="who">{e.member}</span>}
            {e.group !== null && <span class="group">{e.group}</span>}
            <span class="text">{e.text}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}

export function JepsenRuns({
  runs,
  error,
  refresh,
}: {
  runs: JepsenRun[] | null;
  error: string | null;
  refresh: () => void;
}) {
  return (
    <div>
      <button type="button" data-testid="jepsen-refresh" onClick={refresh}>
        Refresh
      </button>
      {error !== null && <span class="error-inline"> {error}</span>}
      {runs === null ? (
        <p class="muted">loading…</p>
      ) : runs.length === 0 ? (
        <p class="muted" data-testid="jepsen-none">
          No jepsen-like runs in the jepsen folder yet.
        </p>
      ) : (
        <table class="grid" data-testid="jepsen-runs">
          <thead>
            <tr>
              <th>run</th>
              <th>workload</th>
              <th>nemesis</th>
              <th>verdict</th>
              <th>finished</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.name} data-testid={`jepsen-${r.name}`}>
                <td>
                  <a href={r.reportUrl} target="_blank" rel="noopener">
                    {r.name}
                  </a>
                </td>
                <td>{r.workload ?? '–'}</td>
                <td>{r.nemesis ?? '–'}</td>
                <td>
                  <span
                    class={`badge ${r.valid === true ? 'badge-valid' : r.valid === false ? 'badge-invalid' : 'badge-unknown'}`}
                  >
                    {r.valid === true ? 'valid' : r.valid === false ? 'INVALID' : 'unknown'}
                  </span>
                </td>
                <td>{r.finishedAt === null ? '–' : new Date(r.finishedAt).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
