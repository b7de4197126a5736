/**
 * The dashboard page: logs in with the token from the address (#token=…, then dropped) or a form, listens to
 * /api/live for the overview and new timeline events, and fetches the timeline and the jepsen-like runs only at
 * start and when needed. Faults go to the server's one actions module, destructive ones after a confirmation.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, Live, fetchJepsen, fetchOverview, fetchTimeline, login, postFault, type LiveStatus } from './api.js';
import { MetricHistory } from './history.js';
import { colour } from './format.js';
import { MembersTable, WorkersTable, GroupsTable } from './tables.js';
import { PartitionEditor } from './partition.js';
import { Chart } from './charts.js';
import { JepsenRuns, Timeline } from './timeline.js';
import type { EventKind, FaultAction, FaultRequest, JepsenRun, LiveMessage, Overview, TimelineEvent } from './types.js';

/** The actions the server refuses without `confirm: true`: the page asks first. */
const DESTRUCTIVE: ReadonlySet<FaultAction> = new Set(['kill', 'restart', 'pause', 'partition']);
const KEEP_EVENTS = 2000;

/** The token from `#token=…`, removed from the address bar and history at once so it is not bookmarked. */
function takeHashToken(): string | null {
  const token = new URLSearchParams(location.hash.slice(1)).get('token');
  if (token !== null) history.replaceState(null, '', location.pathname + location.search);
  return token !== null && token !== '' ? token : null;
}

type Phase = 'starting' | 'login' | 'ready';
type Notice = { kind: 'ok' | 'error'; text: string } | null;

function describe(f: FaultRequest): string {
  if (f.action === 'partition')
    return `Partition the cluster into ${(f.sides ?? []).map((s) => `[${s.join(' ')}]`).join(' and ')}?`;
  const what: Record<string, string> = {
    kill: 'Kill %s (SIGKILL, no clean shutdown)?',
    restart: 'Restart %s (stop it, then start it again)?',
    pause: 'Pause %s (SIGSTOP: it stays alive but silent)?',
  };
  return (what[f.action] ?? `${f.action} %s?`).replace('%s', f.member ?? '');
}

export function App() {
  const token = useRef<string | null>(null);
  if (token.current === null) token.current = takeHashToken();
  const [phase, setPhase] = useState<Phase>('starting');
  const [loginError, setLoginError] = useState<string | null>(null);
  const [overview, setOverview] = useState<Overview | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [events, setEvents] = useState<Record<string, TimelineEvent[]>>({});
  const [live, setLive] = useState<LiveStatus>('connecting');
  const [runs, setRuns] = useState<JepsenRun[] | null>(null);
  const [runsError, setRunsError] = useState<string | null>(null);
  const [pending, setPending] = useState<FaultRequest | null>(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<Notice>(null);
  const [kinds, setKinds] = useState<ReadonlySet<EventKind>>(
    new Set<EventKind>(['fault', 'leader', 'election', 'snapshot', 'up', 'down']),
  );
  const metrics = useRef(new MetricHistory());
  const selectedRef = useRef<string | null>(null);
  selectedRef.current = selected;
  const eventsRef = useRef(events);
  eventsRef.current = events;

  const merge = useCallback((incoming: TimelineEvent[]) => {
    if (incoming.length === 0) return;
    setEvents((prev) => {
      const next = { ...prev };
      const byCluster = new Map<string, TimelineEvent[]>();
      for (const e of incoming) byCluster.set(e.cluster, [...(byCluster.get(e.cluster) ?? []), e]);
      for (const [name, list] of byCluster) {
        const bySeq = new Map((next[name] ?? []).map((e) => [e.seq, e]));
        for (const e of list) bySeq.set(e.seq, e);
        next[name] = [...bySeq.values()].sort((a, b) => a.seq - b.seq).slice(-KEEP_EVENTS);
      }
      return next;
    });
  }, []);

  const showOverview = useCallback((o: Overview) => {
    metrics.current.add(o);
    setOverview(o);
  }, []);

  const loadRuns = useCallback(() => {
    fetchJepsen().then(
      (r) => {
        setRuns(r);
        setRunsError(null);
      },
      (e: Error) => setRunsError(e.message),
    );
  }, []);

  /** Newer events of a cluster than the page holds (all of them the first time). */
  const catchUp = useCallback(
    (name: string) => {
      const held = eventsRef.current[name];
      const since = held !== undefined && held.length > 0 ? held[held.length - 1]!.seq : undefined;
      fetchTimeline(name, since).then(merge, (e: Error) =>
        setNotice({ kind: 'error', text: `timeline: ${e.message}` }),
      );
    },
    [merge],
  );

  const liveRef = useRef<Live | null>(null);

  const start = useCallback(async () => {
    try {
      if (token.current !== null) await login(token.current);
      showOverview(await fetchOverview());
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        // A refused token says so; no token and no session just asks for one.
        setLoginError(token.current !== null ? `the token was refused (${e.message})` : null);
        token.current = null;
        setPhase('login');
        return;
      }
      setNotice({ kind: 'error', text: `cannot reach the dashboard server: ${(e as Error).message}` });
    }
    setPhase('ready');
    loadRuns();
    liveRef.current?.stop();
    const l = new Live({
      message: (m: LiveMessage) => {
        if (m.type === 'overview') showOverview(m.overview);
        else if (m.type === 'timeline') merge(m.events);
      },
      status: setLive,
      // Back after a gap: the server may have restarted, and its event numbers with it, so the timeline is
      // fetched whole again rather than "after the last seq" (one request per reconnection).
      reopened: () => {
        eventsRef.current = {};
        setEvents({});
        if (selectedRef.current !== null) catchUp(selectedRef.current);
      },
      // The socket keeps failing: if the session is gone (server restarted), log in again or ask for the token.
      failing: () => {
        fetchOverview().catch(async (e: unknown) => {
          if (!(e instanceof ApiError) || e.status !== 401) return;
          if (token.current !== null) {
            await login(token.current).catch(() => undefined);
            return;
          }
          l.stop();
          setPhase('login');
        });
      },
    });
    liveRef.current = l;
    l.start();
  }, [catchUp, loadRuns, merge, showOverview]);

  useEffect(() => {
    void start();
    return () => liveRef.current?.stop();
    // Once per page load.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // The picked cluster: kept while it exists, else the first one.
  const clusters = overview?.clusters ?? [];
  useEffect(() => {
    if (clusters.length === 0) return;
    if (selected === null || !clusters.some((c) => c.name === selected)) setSelected(clusters[0]!.name);
  }, [clusters, selected]);

  // The timeline is fetched when a cluster is first shown; the socket brings the rest.
  useEffect(() => {
    if (phase === 'ready' && selected !== null) catchUp(selected);
  }, [phase, selected, catchUp]);

  useEffect(() => {
    if (overview !== null) document.body.dataset['loaded'] = 'true';
  }, [overview]);

  const cluster = clusters.find((c) => c.name === selected) ?? null;
  const order = useMemo(() => new Map((cluster?.members ?? []).map((m, i) => [m.id, i])), [cluster]);
  const colourOf = useCallback((id: string) => colour(order.get(id) ?? 0), [order]);

  const run = async (f: FaultRequest): Promise<void> => {
    if (cluster === null) return;
    setBusy(true);
    setNotice(null);
    try {
      const answer = await postFault(cluster.name, DESTRUCTIVE.has(f.action) ? { ...f, confirm: true } : f);
      merge([answer.event]);
      const warnings = answer.warnings ?? [];
      setNotice({
        kind: 'ok',
        text: warnings.length === 0 ? answer.event.text : `${answer.event.text} (${warnings.join('; ')})`,
      });
    } catch (e) {
      setNotice({ kind: 'error', text: `${f.action}${f.member ? ' ' + f.member : ''}: ${(e as Error).message}` });
    } finally {
      setBusy(false);
    }
  };

  // Escape cancels the confirmation, as a dialog should.
  useEffect(() => {
    if (pending === null) return;
    const onKey = (e: KeyboardEvent): void => {
      if (e.key === 'Escape') setPending(null);
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [pending]);

  const ask = (f: FaultRequest): void => {
    if (DESTRUCTIVE.has(f.action)) setPending(f);
    else void run(f);
  };

  if (phase === 'login')
    return (
      <LoginForm
        error={loginError}
        submit={(t) => {
          token.current = t;
          setLoginError(null);
          setPhase('starting');
          void start();
        }}
      />
    );

  const faultTimes = (cluster === null ? [] : (events[cluster.name] ?? []))
    .filter((e) => e.kind === 'fault')
    .map((e) => e.at);
  // A slow leader still leads: its last answered role counts.
  const leaders =
    cluster?.members
      .filter((m) => m.state === 'leader' || (m.state === 'slow' && m.role === 'leader'))
      .map((m) => m.id) ?? [];
  const history = metrics.current;
  return (
    <div class="page">
      <header>
        <h1>raftkit dashboard</h1>
        <label>
          cluster{' '}
          <select
            data-testid="cluster-picker"
            value={selected ?? ''}
            onChange={(e) => setSelected((e.target as HTMLSelectElement).value)}
          >
            {clusters.map((c) => (
              <option key={c.name} value={c.name}>
                {c.name} ({c.service}, {c.members.length} members)
              </option>
            ))}
          </select>
        </label>
        {cluster !== null && (
          <span class="leader-summary">
            {/* A grouped service's member-level role is its meta group's. */}
            {cluster.groups.some((g) => g.name === 'meta') ? 'meta leader' : 'leader'}:{' '}
            <strong data-testid="cluster-leader">{leaders.length === 0 ? 'none' : leaders.join(', ')}</strong>
            {cluster.groups.length > 1 && <span class="muted"> · {cluster.groups.length} groups</span>}
          </span>
        )}
        <span class={`live live-${live}`} data-testid="live-status" data-state={live}>
          {live}
        </span>
      </header>
      {notice !== null && (
        <div class={`notice notice-${notice.kind}`} data-testid={notice.kind === 'error' ? 'error' : 'notice'}>
          {notice.text}
          <button type="button" class="link" onClick={() => setNotice(null)}>
            dismiss
          </button>
        </div>
      )}
      {overview === null ? (
        <p class="muted">waiting for the first overview…</p>
      ) : cluster === null ? (
        <p class="muted" data-testid="no-clusters">
          No running cluster under the data root ({`npx cluster up --service kv`} starts one).
        </p>
      ) : (
        <main>
          <section>
            <h2>
              Members{' '}
              <span class="muted">
                {cluster.service} · {cluster.dataDir}
              </span>
            </h2>
            <MembersTable
              cluster={cluster}
              busy={busy}
              ask={(action, member) => ask(member === undefined ? { action } : { action, member })}
            />
          </section>
          <section>
            <h2>Partition</h2>
            <PartitionEditor
              key={cluster.name}
              cluster={cluster}
              colourOf={colourOf}
              busy={busy}
              partition={(sides) => ask({ action: 'partition', sides })}
              heal={() => ask({ action: 'heal' })}
            />
          </section>
          <section class="charts">
            <Chart
              testid="chart-rps"
              title="requests/s per member"
              unit="req/s"
              members={history.members(cluster.name)}
              colourOf={colourOf}
              columns={history.columns(cluster.name, 'rps')}
              faults={faultTimes}
            />
            <Chart
              testid="chart-p99"
              title="p99 latency per member"
              unit="ms"
              members={history.members(cluster.name)}
              colourOf={colourOf}
              columns={history.columns(cluster.name, 'p99')}
              faults={faultTimes}
            />
          </section>
          <section>
            <h2>Groups</h2>
            <GroupsTable cluster={cluster} />
          </section>
          <section>
            <h2>Workers</h2>
            <WorkersTable cluster={cluster} />
          </section>
          <section>
            <h2>Timeline</h2>
            <Timeline
              events={events[cluster.name] ?? []}
              kinds={kinds}
              toggle={(k) =>
                setKinds((s) => {
                  const n = new Set(s);
                  if (n.has(k)) n.delete(k);
                  else n.add(k);
                  return n;
                })
              }
            />
          </section>
          <section>
            <h2>jepsen-like runs</h2>
            <JepsenRuns runs={runs} error={runsError} refresh={loadRuns} />
          </section>
        </main>
      )}
      {pending !== null && (
        // The backdrop's click is a pointer shortcut for Cancel; the keyboard has Escape and the buttons.
        // biome-ignore lint/a11y/noStaticElementInteractions: see above
        // biome-ignore lint/a11y/useKeyWithClickEvents: see above
        <div class="modal-back" onClick={() => setPending(null)}>
          {/* biome-ignore lint/a11y/useKeyWithClickEvents: only stops a click inside the dialog closing it */}
          <div
            class="modal"
            role="dialog"
            aria-modal="true"
            data-testid="confirm-dialog"
            onClick={(e) => e.stopPropagation()}
          >
            <p>{describe(pending)}</p>
            <div class="modal-buttons">
              <button type="button" data-testid="confirm-no" onClick={() => setPending(null)}>
                Cancel
              </button>
              <button
                type="button"
                class="danger"
                data-testid="confirm-yes"
                autofocus
                onClick={() => {
                  const f = pending;
                  setPending(null);
                  void run(f);
                }}
              >
                {pending.action}
              </button>
            </div>
          </div>
        </div>
      )}
    </div>
  );
}

function LoginForm({ error, submit }: { error: string | null; submit: (token: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="login"
      data-testid="login-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim() !== '') submit(value.trim());
      }}
    >
      <h1>raftkit dashboard</h1>
      <p>
        The cluster token (the <code>token</code> file of a cluster's data folder, or the one `cluster dashboard`
        printed):
      </p>
      <input
        type="password"
        data-testid="token-input"
        value={value}
        onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        autofocus
      />
      <button type="submit" data-testid="token-submit">
        Open
      </button>
      {error !== null && (
        <p class="error-inline" data-testid="login-error">
          {error}
        </p>
      )}
    </form>
  );
}
