/**
 * The notify router or channel worker on the FIFO baseline (notify-fifo-layout.ts), as the `notify` benchmark's
 * peer runs them: `node notify-fifo-worker.js SPEC`, SPEC a JSON file (FifoWorkerSpec) written by notify-fifo.ts.
 * It is the service's own code (`startRouter`, `startDelivery` of @raftkit/notify) with the layout passed in.
 * Logs one JSON object a line on stdout; stops on SIGTERM or SIGINT.
 */
import { readFileSync } from 'node:fs';
import { jsonLogger, type PeerAddress } from '@raftkit/http';
import { startDelivery, startRouter } from '@raftkit/notify';
import { FIFO_LAYOUT } from './notify-fifo-layout.js';

export interface FifoWorkerSpec {
  id: string;
  role: 'router' | 'delivery';
  dataDir: string;
  httpAddress: string;
  tcpAddress: string;
  /** The cluster's members (HTTP addresses). */
  members: PeerAddress[];
  /** Every worker: the cluster's (the stand-in providers) and these two. */
  workers: PeerAddress[];
  token: string;
  settings: Record<string, string>;
}

const spec = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as FifoWorkerSpec;
const logger = jsonLogger(() => ({ worker: spec.id, role: spec.role, service: 'notify', layout: 'fifo' }));
const options = {
  id: spec.id,
  role: spec.role,
  index: 1,
  dataDir: spec.dataDir,
  httpAddress: spec.httpAddress,
  tcpAddress: spec.tcpAddress,
  members: spec.members,
  workers: spec.workers,
  tokens: [spec.token],
  service: 'notify',
  settings: spec.settings,
  logger,
};
const running =
  spec.role === 'router' ? await startRouter(options, FIFO_LAYOUT) : await startDelivery(options, FIFO_LAYOUT);
logger.log('info', 'worker ready', { http: spec.httpAddress });

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  logger.log('info', 'stopping', { signal });
  void running.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
