/**
 * A worker process (a service's process that is not a Raft member): `node cluster/dist/src/worker.js --cluster DIR
 * --id app1`. Everything else (service, role, addresses, the other processes, settings) comes from DIR/cluster.json,
 * which `cluster up` wrote before starting it, and the token from DIR/token. Logs one JSON object a line on stdout.
 * Stops cleanly on SIGTERM or SIGINT.
 */
import { mkdirSync } from 'node:fs';
import { Command } from 'commander';
import { jsonLogger, type PeerAddress } from '@raftkit/http';
import { exitOnUncaught, stopOnSignals } from './lifecycle.js';
import { loadService } from './services.js';
import { memberDir, readState, readToken } from './state.js';

const opts = new Command()
  .name('worker')
  .requiredOption('--cluster <dir>', 'the cluster data directory')
  .requiredOption('--id <id>', 'this worker id (e.g. app1)')
  .parse()
  .opts<{ cluster: string; id: string }>();

const log = jsonLogger(() => ({ worker: opts.id }));

function fail(message: string): never {
  log.log('error', message);
  process.exit(2);
}

let state;
try {
  state = readState(opts.cluster);
} catch (e) {
  fail(String((e as Error).message));
}
const record = state.workers?.find((w) => w.id === opts.id) ?? fail(`no worker ${opts.id} in ${opts.cluster}/cluster.json`);
const service = (await loadService(state.service)) ?? fail(`unknown service ${state.service}`);
const role = service.workers.find((r) => r.role === record.role) ?? fail(`service ${state.service} has no worker role ${record.role}`);
const token = readToken(state.dataDir);
const logger = jsonLogger(() => ({ worker: record.id, role: record.role, service: state.service }));
const dataDir = memberDir(state.dataDir, record.id);
mkdirSync(dataDir, { recursive: true });

exitOnUncaught(logger);

const members: PeerAddress[] = state.members.filter((m) => !m.removed).map((m) => ({ id: m.id, role: 'member', httpAddress: m.httpAddress }));
const workers: PeerAddress[] = (state.workers ?? []).map((w) => ({ id: w.id, role: w.role, httpAddress: w.httpAddress, tcpAddress: w.tcpAddress }));
const running = await role
  .start({
    id: record.id,
    role: record.role,
    index: record.index,
    dataDir,
    httpAddress: record.httpAddress,
    tcpAddress: record.tcpAddress,
    members,
    workers,
    tokens: [token],
    settings: state.settings ?? {},
    logger,
  })
  .catch((e: unknown) => fail(`could not start: ${String((e as Error)?.stack ?? e)}`));
logger.log('info', 'worker ready', { http: record.httpAddress, tcp: record.tcpAddress });

stopOnSignals(logger, () => running.stop());
