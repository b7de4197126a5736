/**
 * A worker process (a service's process that is not a Raft member). Two ways to start one:
 * - `node cluster/dist/src/worker.js --cluster DIR --id app1`: everything else (service, role, addresses, the
 *   other processes, settings) comes from DIR/cluster.json, which `cluster up` wrote before starting it, and the
 *   token from DIR/token;
 * - on its own host, everything as flags or `--config FILE` (host-config.ts): `--service --id --data --http --tcp
 *   --members id=host:port,...` (the members' advertised HTTP addresses) and optionally `--workers`, `--set`,
 *   `--advertise-http`, `--token-file`, and `--tls-ca` (the members serve HTTPS: call them trusting that CA).
 *   Workers themselves serve plain HTTP: the services' worker-to-worker calls are http://, and a worker holds no
 *   Raft state (put them on the members' private network, or behind a TLS-terminating proxy).
 * Logs one JSON object a line on stdout. Stops cleanly on SIGTERM or SIGINT. Bad settings: one line on stderr
 * and exit 2.
 */
import { mkdirSync } from 'node:fs';
import { hostPort, jsonLogger, ownerOnlyFiles, useClusterTls, type ClusterTls, type PeerAddress } from '@raftkit/http';
import { exitOnUncaught, stopOnSignals } from './lifecycle.js';
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
import { memberDir, readState, readToken } from './state.js';

// Before any I/O: what the worker stores (object stores, the click log's LevelDB, analytics) is its owner's only.
ownerOnlyFiles();

const FLAGS: readonly FlagSpec[] = [
  {
    name: 'cluster',
    kind: 'string',
    help: 'a cluster data directory written by `cluster up` (then only --id is needed)',
    optional: true,
  },
  { name: 'id', kind: 'string', help: 'this worker id: its role and 1-based index, e.g. app1' },
  { name: 'service', kind: 'string', help: 'the service (kv, lock, log...: cluster/src/services.ts)', optional: true },
  { name: 'role', kind: 'string', help: 'its role (default: the id without its trailing digits)', optional: true },
  { name: 'data', kind: 'string', help: 'a directory of its own, kept across restarts', optional: true },
  { name: 'http', kind: 'address', help: 'HTTP listen address host:port', optional: true },
  { name: 'advertise-http', kind: 'address', help: 'HTTP address the others call (default: --http)', optional: true },
  { name: 'tcp', kind: 'address', help: 'second listener (binary protocols) host:port', optional: true },
  { name: 'members', kind: 'addresses', help: "the Raft members' HTTP addresses: id=host:port,..." },
  {
    name: 'workers',
    kind: 'pairs',
    help: "the cluster's other workers: id=HTTP_HOST:PORT[/TCP_HOST:PORT],... (the binary listener when it has one)",
  },
  { name: 'set', kind: 'pairs', help: "the service's settings: key=value,..." },
  {
    name: 'token-file',
    kind: 'string',
    help: 'file holding the cluster token (or set CLUSTER_AUTH_TOKEN)',
    optional: true,
  },
  {
    name: 'tls-ca',
    kind: 'string',
    help: "PEM of the cluster's CA: the members are called over HTTPS",
    optional: true,
  },
];

interface WorkerSettings {
  service: string;
  id: string;
  role: string;
  index: number;
  dataDir: string;
  httpAddress: string;
  advertiseHttp: string;
  tcpAddress: string;
  members: PeerAddress[];
  workers: PeerAddress[];
  token: string;
  settings: Record<string, string>;
  tls: ClusterTls | null;
}

function workerSettings(argv: readonly string[]): WorkerSettings {
  const s = parseSettings('worker', "one of a service's processes that is not a Raft member", FLAGS, argv);
  const id = str(s.id)!;
  const tls = tlsOf(s);
  const cluster = str(s.cluster);
  if (cluster !== undefined) return fromClusterFile(cluster, id, tls);
  const need = (name: string): string => str(s[name]) ?? fail(`--${name} is required without --cluster`);
  const service = need('service');
  if (!serviceNames().includes(service))
    throw new ConfigError(`--service: unknown service ${service}; known: ${serviceNames().join(', ')}`);
  const m = /^(.*?)(\d+)$/.exec(id);
  const role = str(s.role) ?? m?.[1] ?? id;
  const httpAddress = need('http');
  const advertiseHttp = advertised(httpAddress, str(s['advertise-http']), 'http');
  const members = Object.entries(addresses(s.members)).map(([mid, address]) => ({
    id: mid,
    role: 'member',
    httpAddress: address,
  }));
  if (members.length === 0)
    throw new ConfigError('--members is required without --cluster: id=host:port,... of the members');
  const tcpAddress = need('tcp');
  const others = Object.entries(s.workers as Record<string, string>).filter(([wid]) => wid !== id);
  const workers: PeerAddress[] = [
    ...others.map(([wid, text]) => workerPeer(wid, text)),
    { id, role, httpAddress: advertiseHttp, tcpAddress },
  ];
  return {
    service,
    id,
    role,
    index: m === null ? 1 : Number(m[2]),
    dataDir: need('data'),
    httpAddress,
    advertiseHttp,
    tcpAddress,
    members: members.sort((a, b) => a.id.localeCompare(b.id)),
    workers,
    token: tokenOf(s),
    settings: s.set as Record<string, string>,
    tls,
  };
}

/** "app2" and "10.0.0.5:8042/10.0.0.5:8162" -> a peer of role app; its binary listener after the slash, if any. */
function workerPeer(id: string, text: string): PeerAddress {
  const [httpAddress, tcpAddress, extra] = text.split('/');
  const valid = (address: string): boolean => {
    try {
      hostPort(address);
      return true;
    } catch {
      return false;
    }
  };
  if (
    extra !== undefined ||
    httpAddress === undefined ||
    !valid(httpAddress) ||
    (tcpAddress !== undefined && !valid(tcpAddress))
  ) {
    throw new ConfigError(`--workers: expected ${id}=HTTP_HOST:PORT[/TCP_HOST:PORT], got ${JSON.stringify(text)}`);
  }
  return {
    id,
    role: /^(.*?)\d+$/.exec(id)?.[1] ?? id,
    httpAddress,
    ...(tcpAddress !== undefined ? { tcpAddress } : {}),
  };
}

function fromClusterFile(dir: string, id: string, tls: ClusterTls | null): WorkerSettings {
  let state;
  try {
    state = readState(dir);
  } catch (e) {
    throw new ConfigError(String((e as Error).message));
  }
  const record = state.workers?.find((w) => w.id === id) ?? fail(`no worker ${id} in ${dir}/cluster.json`);
  const dataDir = memberDir(state.dataDir, record.id);
  return {
    service: state.service,
    id,
    role: record.role,
    index: record.index,
    dataDir,
    httpAddress: record.httpAddress,
    advertiseHttp: record.httpAddress,
    tcpAddress: record.tcpAddress,
    members: state.members
      .filter((m) => !m.removed)
      .map((m) => ({ id: m.id, role: 'member', httpAddress: m.httpAddress })),
    workers: (state.workers ?? []).map((w) => ({
      id: w.id,
      role: w.role,
      httpAddress: w.httpAddress,
      tcpAddress: w.tcpAddress,
    })),
    token: readToken(state.dataDir),
    settings: state.settings ?? {},
    tls,
  };
}

function fail(message: string): never {
  throw new ConfigError(message);
}

let opts: WorkerSettings;
try {
  opts = workerSettings(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof ConfigError)) throw e;
  process.stderr.write(`worker: ${e.message}\n`);
  process.exit(2);
}

const logger = jsonLogger(() => ({ worker: opts.id, role: opts.role, service: opts.service }));
const service = await loadService(opts.service);
const role = service?.workers.find((r) => r.role === opts.role);
if (role === undefined) {
  process.stderr.write(`worker: service ${opts.service} has no worker role ${opts.role}\n`);
  process.exit(2);
}
// Process-wide: its calls to the members (https, see clusterUrl) trust the cluster's CA; it has no certificate,
// so it serves plain HTTP.
if (opts.tls !== null) useClusterTls(opts.tls);
mkdirSync(opts.dataDir, { recursive: true });

exitOnUncaught(logger);

const running = await role
  .start({
    id: opts.id,
    role: opts.role,
    index: opts.index,
    dataDir: opts.dataDir,
    httpAddress: opts.httpAddress,
    tcpAddress: opts.tcpAddress,
    members: opts.members,
    workers: opts.workers,
    tokens: [opts.token],
    service: opts.service,
    settings: opts.settings,
    logger,
  })
  .catch((e: unknown) => {
    logger.log('error', `could not start: ${String((e as Error)?.stack ?? e)}`);
    process.exit(2);
  });
logger.log('info', 'worker ready', { http: opts.advertiseHttp, tcp: opts.tcpAddress, tls: opts.tls !== null });

stopOnSignals(logger, () => running.stop());
