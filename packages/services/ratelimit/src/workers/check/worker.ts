/**
 * The "check" worker role: a stateless check instance. Serves POST /v1/check over HTTP and the binary check
 * protocol on its second listener, forwards the rule API to the rule store, keeps the rule cache current,
 * health-checks its stores every second and syncs hot counters. This file only wires the parts together.
 */
import {
  clusterUrl,
  ClusterClient,
  MetricsRegistry,
  serveWorkerHttp,
  type Principal,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { serveRpc } from '@raftkit/rpc';
import { requireTenantAccess } from '../../tenants.js';
import type { CheckAnswer, CheckRequest } from './decide.js';
import { CheckEngine } from './engine.js';
import { CHECK_BODY, checkExactRoute, checkRoute, forwardTo, toHttpError, type Decide } from './http.js';
import { checkMetrics } from './metrics.js';
import { watchPauses } from './pauses.js';
import { answerTuple, parseCheckTuple } from './request.js';
import { RuleSync } from './rule-sync.js';
import { embeddedStores, StoreLinks } from './stores.js';
import { StoreShard } from '../store/shard.js';
import { regionSyncMs } from '../store/worker.js';

const HEALTH_EVERY_MS = 1_000;
const HOT_TICK_MS = 20;

/** `--set store_queue=N`: store calls one instance lets wait on one store before it answers overloaded (default 1024). */
function storeQueue(settings: Record<string, string>): number {
  const raw = settings.store_queue ?? '1024';
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > 1_000_000)
    throw new TypeError(`store_queue must be an integer from 1 to 1000000, got ${JSON.stringify(raw)}`);
  return n;
}

/** `--set store_timeout_ms=N`: the budget of one store call on the hot path (default 50). */
function storeTimeout(settings: Record<string, string>): number {
  const raw = settings.store_timeout_ms ?? '50';
  const ms = Number(raw);
  if (!/^\d+$/.test(raw) || ms < 1 || ms > 5_000)
    throw new TypeError(`store_timeout_ms must be an integer from 1 to 5000, got ${JSON.stringify(raw)}`);
  return ms;
}

/** The check's errors as the HTTP path answers them (the RPC transport then carries their codes). */
function rejectAsHttpError(error: unknown): never {
  throw toHttpError(error) ?? error;
}

async function startCheckWorker(options: WorkerOptions): Promise<RunningWorker> {
  const timeoutMs = storeTimeout(options.settings);
  const maxQueue = storeQueue(options.settings);
  const metrics = new MetricsRegistry();
  // Embedded stores: this instance holds shard `index` of the counters (StoreLinks, STORE.md "Embedded stores").
  const shard = embeddedStores(options)
    ? new StoreShard({ regions: 1, syncMs: regionSyncMs(options.settings), region: 1, metrics })
    : null;
  const stores = new StoreLinks(options, timeoutMs, shard);
  const members = new ClusterClient({
    endpoints: options.members.map((m) => clusterUrl(m.httpAddress)),
    token: options.tokens[0]!,
    timeoutMs: 5_000,
  });
  // The instance answers checks only once it holds the rule set.
  const rules = new RuleSync(members, options.logger);
  await rules.start();

  const decide: Decide = async (principal: Principal, request: CheckRequest): Promise<CheckAnswer> => {
    requireTenantAccess(principal, request.serviceId, 'check');
    return engine.check(request);
  };
  // The hot-key tick runs only while there is something to watch (HotKeys.watching): an instance whose rules have
  // no hot_key does not wake every 20 ms, which on a shared machine is a moment a busy instance may wait for a core.
  let hotTimer: NodeJS.Timeout | null = null;
  const hotTick = (): void => {
    engine.hotTick();
    if (!engine.hot.watching && hotTimer !== null) {
      clearInterval(hotTimer);
      hotTimer = null;
    }
  };
  const engine = new CheckEngine({
    rules: () => rules.current,
    storeFor: (rule) => stores.storeFor(rule),
    stores: stores.all,
    instances: (rule) => stores.instances(rule),
    storeTimeoutMs: timeoutMs,
    maxQueue,
    metrics: checkMetrics(metrics),
    onModeChange: (link) =>
      options.logger.log('warn', 'store mode changed', { store: link.id, mode: link.health.mode }),
    onHotKeys: () => {
      hotTimer ??= setInterval(hotTick, HOT_TICK_MS);
    },
  });
  const http = await serveWorkerHttp(options, {
    metrics,
    health: () => ({
      region: stores.region,
      rules_revision: rules.current.revision,
      stores: Object.fromEntries(stores.all.map((l) => [l.id, l.health.mode])),
    }),
  });
  rules.onChange = (index) => engine.rulesChanged(index);
  const degraded = http.metrics.gauge(
    'ratelimit_degraded',
    "1 while this instance serves a store's counters from local fallback buckets (degraded mode), by store",
  );
  for (const link of stores.all) degraded.set(() => (link.health.degraded ? 1 : 0), { store: link.id });
  http.metrics.gauge('ratelimit_rules_revision', 'Revision of the cached rule set').set(() => rules.current.revision);
  http.metrics.gauge('ratelimit_hot_keys', 'Counters served from local hot-key buckets').set(() => engine.hot.size);
  const forward = forwardTo(members);
  http.router
    .post('/v1/check', { admits: 'authenticated' }, checkRoute(decide))
    .get('/v1/rules', { admits: 'authenticated' }, forward)
    .get('/v1/rules/:rule_id', { admits: 'authenticated' }, forward)
    .put('/v1/rules/:rule_id', { admits: 'authenticated' }, forward)
    .delete('/v1/rules/:rule_id', { admits: 'authenticated' }, forward)
    .get('/v1/tenants/:service_id', { admits: 'cluster' }, forward)
    .put('/v1/tenants/:service_id', { admits: 'cluster' }, forward)
    // The hot request as an exact route: a Map lookup, no route matching (the general route above answers the same
    // request with a query string).
    .exact('POST', '/v1/check', { admits: 'authenticated', body: CHECK_BODY }, checkExactRoute(decide, options.logger));

  const wire = await serveRpc({
    address: options.tcpAddress,
    tokens: options.tokens,
    logger: options.logger,
    name: 'ratelimit_check',
    metrics: http.metrics,
    handler: (request, { principal }) => {
      // A check is a tuple (an array); anything else is the store protocol, served with embedded stores only.
      if (!Array.isArray(request) && shard !== null) return shard.handle(request, principal);
      let answer: CheckAnswer | Promise<CheckAnswer>;
      try {
        const parsed = parseCheckTuple(request);
        requireTenantAccess(principal, parsed.serviceId, 'check');
        answer = engine.check(parsed);
      } catch (error) {
        rejectAsHttpError(error);
      }
      // Counters in this process: answered in this turn, no promise.
      return answer instanceof Promise ? answer.then(answerTuple, rejectAsHttpError) : answerTuple(answer);
    },
  });

  let healthBusy = false;
  const healthTimer = setInterval(() => {
    if (healthBusy) return;
    healthBusy = true;
    void engine.healthRound().finally(() => {
      healthBusy = false;
    });
  }, HEALTH_EVERY_MS);
  const pauses = watchPauses(http.metrics, () => engine.decided);
  shard?.start();
  options.logger.log('info', 'check instance started', {
    region: stores.region,
    embedded_store: shard !== null,
    stores: stores.all.map((l) => l.id),
    rules_revision: rules.current.revision,
  });

  return {
    httpPort: http.port,
    stop: async () => {
      clearInterval(healthTimer);
      if (hotTimer !== null) clearInterval(hotTimer);
      pauses.stop();
      shard?.stop();
      rules.stop();
      await Promise.all([wire.close(), http.close(), members.close()]);
      stores.close();
    },
  };
}

/**
 * A check allocates a few KB (the decoded call, counter keys, the answer): at tens of thousands of checks a second
 * V8's default young generation (semi-spaces that start at 1 MB and stay small while little survives) is scavenged
 * every few tens of milliseconds, and every check that arrives during a scavenge waits for it. Fixed 64 MB
 * semi-spaces make scavenges about ten times rarer for about the same pause each (what survives a scavenge is the
 * checks in flight, not the young generation's size; bench/RESULTS.md, ratelimit, findings). Costs 128 MB of
 * address space per instance.
 */
const CHECK_NODE_FLAGS = ['--max-semi-space-size=64', '--min-semi-space-size=64'];

export const checkRole: WorkerRole = { role: 'check', count: 3, nodeFlags: CHECK_NODE_FLAGS, start: startCheckWorker };
