/**
 * The member process: `node cluster/dist/src/member.js --service kv --id n1 --data DIR --raft 127.0.0.1:7001
 * --http 127.0.0.1:8001 --peers n1=127.0.0.1:7001,n2=...` (or --join n1=...,n2=... to join a running cluster,
 * or neither to restart from the data directory alone). On its own host: listen on 0.0.0.0 and tell the others
 * `--advertise-raft`/`--advertise-http`; with `--tls-cert/--tls-key/--tls-ca` the Raft transport is mutual TLS and
 * the HTTP API HTTPS. Every flag may come from `--config FILE` instead (host-config.ts). Logs one JSON object a
 * line on stdout. Stops cleanly on SIGTERM or SIGINT. Bad settings: one line on stderr and exit 2.
 */
import { jsonLogger, ownerOnlyFiles, replicasProblem, useClusterTls, type ClusterTls } from '@raftkit/http';
import { exitOnUncaught, stopOnSignals } from './lifecycle.js';
import type { MemberOptions } from './member-admin.js';
import {
  addresses,
  advertised,
  ConfigError,
  parseSettings,
  str,
  tlsOf,
  tokenOf,
  type FlagSpec,
} from './host-config.js';
import { loadService, serviceNames } from './services.js';

// Before any I/O: the member's LevelDB folder and files (and any store a service keeps) are its owner's only.
ownerOnlyFiles();

const FLAGS: readonly FlagSpec[] = [
  { name: 'service', kind: 'string', help: 'the service (kv, lock, log...: cluster/src/services.ts)' },
  { name: 'id', kind: 'string', help: 'this member id (its TLS certificate must name it)' },
  { name: 'data', kind: 'string', help: 'LevelDB directory' },
  { name: 'raft', kind: 'address', help: 'Raft listen address host:port (0.0.0.0:port for every interface)' },
  { name: 'http', kind: 'address', help: 'HTTP listen address host:port' },
  {
    name: 'advertise-raft',
    kind: 'address',
    help: 'Raft address the other members dial (default: --raft)',
    optional: true,
  },
  {
    name: 'advertise-http',
    kind: 'address',
    help: 'HTTP address clients and members call (default: --http)',
    optional: true,
  },
  {
    name: 'peers',
    kind: 'addresses',
    help: 'bootstrap members, this one included: id=host:port,... (advertised Raft addresses)',
  },
  { name: 'join', kind: 'addresses', help: 'join a running cluster whose members are id=host:port,...' },
  {
    name: 'token-file',
    kind: 'string',
    help: 'file holding the cluster token (or set CLUSTER_AUTH_TOKEN)',
    optional: true,
  },
  {
    name: 'tls-cert',
    kind: 'string',
    help: 'PEM certificate naming this member id (CN and SAN), for Raft and HTTPS',
    optional: true,
  },
  { name: 'tls-key', kind: 'string', help: 'PEM key of --tls-cert', optional: true },
  { name: 'tls-ca', kind: 'string', help: 'PEM of the CA signing every member certificate', optional: true },
  { name: 'tick-ms', kind: 'integer', help: 'milliseconds per Raft tick', default: '100' },
  { name: 'snapshot-every', kind: 'integer', help: 'applied entries between snapshots', default: '100000' },
  {
    name: 'replicas',
    kind: 'integer',
    help: "a grouped service's replicas per new group, 3 or 5 (the same on every member; default: the service's)",
    optional: true,
  },
];

interface MemberSettings {
  service: string;
  id: string;
  data: string;
  raft: string;
  http: string;
  advertiseRaft: string;
  advertiseHttp: string;
  bootstrap: Record<string, string>;
  peers: Record<string, string>;
  token: string;
  tls: (ClusterTls & { cert: string; key: string }) | null;
  tickMs: number;
  snapshotEvery: number;
  replicas: number | undefined;
}

function memberSettings(argv: readonly string[]): MemberSettings {
  const s = parseSettings(
    'member',
    'one Raft member of a service cluster (once, to recover a survivor of a lost quorum: --force-new-cluster, see docs/deployment.md)',
    FLAGS,
    argv,
  );
  const id = str(s.id)!;
  const service = str(s.service)!;
  if (!serviceNames().includes(service))
    throw new ConfigError(`--service: unknown service ${service}; known: ${serviceNames().join(', ')}`);
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(id))
    throw new ConfigError(`--id: ${JSON.stringify(id)} is not an id (letters, digits, . _ -, at most 64)`);
  const bootstrap = addresses(s.peers);
  const peers = addresses(s.join);
  if (Object.keys(bootstrap).length > 0 && Object.keys(peers).length > 0)
    throw new ConfigError('--peers founds a cluster and --join joins one: give one of them');
  // This member's own entry of --peers is what the others dial: it is its advertised Raft address.
  const listed = bootstrap[id];
  const advertiseRaft = advertised(str(s.raft)!, str(s['advertise-raft']) ?? listed, 'raft');
  if (listed !== undefined && listed !== advertiseRaft)
    throw new ConfigError(`--peers names ${id} at ${listed} but --advertise-raft is ${advertiseRaft}`);
  if (Object.keys(bootstrap).length > 0) bootstrap[id] = advertiseRaft;
  if (peers[id] !== undefined) throw new ConfigError(`--join lists ${id} itself: list the members already running`);
  const tls = tlsOf(s);
  // The member count is not known here (a member may join later): `cluster up` checks the count against it.
  const replicas = str(s.replicas);
  if (replicas !== undefined && replicasProblem(Number(replicas), Number(replicas)) !== null)
    throw new ConfigError(`--replicas: ${replicasProblem(Number(replicas), Number(replicas))}`);
  if (tls !== null && (tls.cert === undefined || tls.key === undefined))
    throw new ConfigError('--tls-ca without --tls-cert and --tls-key: a member needs its own certificate');
  return {
    service,
    id,
    data: str(s.data)!,
    raft: str(s.raft)!,
    http: str(s.http)!,
    advertiseRaft,
    advertiseHttp: advertised(str(s.http)!, str(s['advertise-http']), 'http'),
    bootstrap,
    peers,
    token: tokenOf(s),
    tls: tls as MemberSettings['tls'],
    tickMs: Number(s['tick-ms']),
    snapshotEvery: Number(s['snapshot-every']),
    replicas: s.replicas === undefined ? undefined : Number(s.replicas),
  };
}

// --force-new-cluster is a one-off of the command line, never a key of the config file: a config that kept it
// would force a new cluster at every restart, throwing away members added since.
const FORCE = '--force-new-cluster';
const forceNewCluster = process.argv.includes(FORCE);

let opts: MemberSettings;
try {
  opts = memberSettings(process.argv.slice(2).filter((a) => a !== FORCE));
} catch (e) {
  if (!(e instanceof ConfigError)) throw e;
  process.stderr.write(`member: ${e.message}\n`);
  process.exit(2);
}

// Every line carries the term: 0 until the Raft member has started (that is its initial term).
let currentTerm = (): number => 0;
const log = jsonLogger(() => ({ member: opts.id, term: currentTerm(), service: opts.service }));

function fail(message: string): never {
  log.log('error', message);
  process.exit(2);
}

const service = (await loadService(opts.service))!;
if (opts.replicas !== undefined && !service.grouped)
  fail(`--replicas: ${opts.service} runs one group on every member; a replica count is for grouped services`);
// Process-wide: this member's HTTP API serves HTTPS with its certificate, and its calls to other members trust the CA.
if (opts.tls !== null) useClusterTls(opts.tls);

exitOnUncaught(log);

const memberOptions: MemberOptions = {
  id: opts.id,
  dataDir: opts.data,
  raftAddress: opts.raft,
  httpAddress: opts.http,
  advertiseRaftAddress: opts.advertiseRaft,
  advertiseHttpAddress: opts.advertiseHttp,
  bootstrap: opts.bootstrap,
  peers: opts.peers,
  tokens: [opts.token],
  ...(opts.tls !== null ? { tls: opts.tls } : {}),
  tickMs: opts.tickMs,
  snapshotEvery: opts.snapshotEvery,
  onFailure: () => void recover(),
  forceNewCluster,
  ...(opts.replicas !== undefined ? { replicas: opts.replicas } : {}),
};

// A member whose storage failed (a full disk, no file descriptors left) is started again in this process from
// its durable state, with growing pauses; if that keeps failing it exits, so that status shows it down rather than
// a member lingering broken. The pid stays the same, so the CLI's kill, pause and restart still reach it.
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 120_000;
const restarts: number[] = [];
let recovering = false;

async function recover(): Promise<void> {
  if (recovering) return;
  recovering = true;
  try {
    await member.stop().catch((e: unknown) => log.log('warn', 'stopping the failed member', { error: String(e) }));
    for (;;) {
      const now = Date.now();
      while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
      if (restarts.length >= MAX_RESTARTS) {
        log.log('error', `storage failed ${MAX_RESTARTS} times in ${RESTART_WINDOW_MS / 1000} s; exiting`);
        process.exit(70);
      }
      restarts.push(now);
      await new Promise((r) => setTimeout(r, 1_000 * restarts.length));
      try {
        member = await service.member(memberOptions);
        currentTerm = member.term;
        log.log('info', 'member restarted from its durable state', { restarts: restarts.length });
        return;
      } catch (e) {
        log.log('error', 'restart failed', { error: String((e as Error)?.message ?? e) });
      }
    }
  } finally {
    recovering = false;
  }
}

let member = await service
  .member(memberOptions)
  .catch((e: unknown) => fail(`could not start: ${String((e as Error)?.message ?? e)}`));
currentTerm = member.term;
// Forced once: a restart after a storage failure resumes from the forced configuration, not forcing again.
memberOptions.forceNewCluster = false;

stopOnSignals(log, () => member.stop());
