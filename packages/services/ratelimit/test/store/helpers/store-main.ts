/**
 * A store worker as a process of its own, without the rest of a cluster: `node store-main.js '<json>'` where the
 * JSON holds the WorkerOptions fields that are data. Prints "ready" on stdout once serving; stops on SIGTERM.
 */
import { jsonLogger, type PeerAddress } from '@raftkit/http';
import { storeRole } from '../../../src/workers/store/worker.js';

interface StoreProcessConfig {
  id: string;
  index: number;
  httpAddress: string;
  tcpAddress: string;
  workers: PeerAddress[];
  tokens: string[];
  settings: Record<string, string>;
}

const config = JSON.parse(process.argv[2] ?? '{}') as StoreProcessConfig;
const logger = jsonLogger(
  () => ({ worker: config.id }),
  (line) => process.stderr.write(line),
);
const running = await storeRole.start({ ...config, role: 'store', dataDir: '', members: [], logger });
process.stdout.write('ready\n');
process.once('SIGTERM', () => void running.stop().then(() => process.exit(0)));
