/**
 * A flash gateway process on the deliberately broken inventory (answer-before-commit.ts), started by the harness
 * instead of the cluster's worker.js for the `flash-async-inventory` workload, with the same arguments:
 * `--cluster DIR --id ID`, DIR the run's data directory where the harness wrote cluster.json and the token
 * (cluster.ts, startWorkers). It is flash's own gateway (`startGateway`) on ours wrapped by the broken backend.
 * Logs one JSON object a line on stdout; stops on SIGTERM or SIGINT.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { clusterUrl, jsonLogger, type PeerAddress } from '@raftkit/http';
import { RaftInventory, startGateway } from '@raftkit/flash';
import { AnswerBeforeCommitInventory } from './answer-before-commit.js';

/** What the harness wrote (cluster.ts): the members' and workers' addresses and the settings. */
interface RunCluster {
  service: string;
  members: Array<{ id: string; httpAddress: string }>;
  workers: Array<{ id: string; role: string; index: number; httpAddress: string; tcpAddress: string }>;
  settings: Record<string, string>;
}

const { values } = parseArgs({ options: { cluster: { type: 'string' }, id: { type: 'string' } } });
if (values.cluster === undefined || values.id === undefined) {
  process.stderr.write('flash-async-gateway: --cluster DIR --id ID are required\n');
  process.exit(2);
}
const dir = values.cluster;
const state = JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as RunCluster;
const token = readFileSync(join(dir, 'token'), 'utf8').trim();
const me = state.workers.find((w) => w.id === values.id);
if (me === undefined) {
  process.stderr.write(`flash-async-gateway: no worker ${values.id} in ${dir}/cluster.json\n`);
  process.exit(2);
}
const members: PeerAddress[] = state.members.map((m) => ({ id: m.id, role: 'member', httpAddress: m.httpAddress }));
const logger = jsonLogger(() => ({
  worker: me.id,
  role: me.role,
  service: state.service,
  inventory: 'answer-before-commit',
}));
const backend = new AnswerBeforeCommitInventory(
  new RaftInventory({ endpoints: members.map((m) => clusterUrl(m.httpAddress)), token }),
);
const running = await startGateway(
  {
    id: me.id,
    role: me.role,
    index: me.index,
    dataDir: join(dir, me.id),
    httpAddress: me.httpAddress,
    tcpAddress: me.tcpAddress,
    members,
    workers: state.workers.map((w) => ({
      id: w.id,
      role: w.role,
      httpAddress: w.httpAddress,
      tcpAddress: w.tcpAddress,
    })),
    tokens: [token],
    service: state.service,
    settings: state.settings,
    logger,
  },
  backend,
);
logger.log('warn', 'worker ready on the UNSAFE answer-before-commit inventory', { http: me.httpAddress });

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  logger.log('info', 'stopping', { signal });
  void running.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
