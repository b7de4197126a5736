/**
 * One ranker process outside `cluster up` (tests and the benchmark start it on their own ports next to an event
 * log): `node dist/src/ranker/main.js` with FEED_RANKER_OPTIONS='{"id","httpAddress","tcpAddress","members":
 * ["host:port"...],"token"}'. The same role code as the cluster's `ranker` workers. Stops on SIGTERM or SIGINT.
 */
import { tmpdir } from 'node:os';
import { jsonLogger } from '@raftkit/http';
import { rankerRole } from './worker.js';

interface StandaloneOptions {
  id: string;
  httpAddress: string;
  tcpAddress: string;
  members: string[];
  token: string;
}

const options = JSON.parse(process.env.FEED_RANKER_OPTIONS ?? '{}') as StandaloneOptions;
const logger = jsonLogger(() => ({ worker: options.id, role: 'ranker' }));
const running = await rankerRole.start({
  id: options.id,
  role: 'ranker',
  index: 1,
  // The ranker keeps nothing on disk.
  dataDir: tmpdir(),
  httpAddress: options.httpAddress,
  tcpAddress: options.tcpAddress,
  members: options.members.map((httpAddress, i) => ({ id: `n${i + 1}`, role: 'member', httpAddress })),
  workers: [{ id: options.id, role: 'ranker', httpAddress: options.httpAddress, tcpAddress: options.tcpAddress }],
  tokens: [options.token],
  settings: {},
  logger,
});
logger.log('info', 'worker ready', { http: options.httpAddress, tcp: options.tcpAddress });

let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  void running.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
