/**
 * The NATS JetStream peer of the event-log benchmark: Debian's `nats-server` (2.9 in bookworm; installed with
 * apt-get when /usr/sbin/nats-server is missing), five servers on 127.0.0.1 routed into one cluster with JetStream
 * on (file storage, each its own store directory in a temporary directory), default durability (nothing turned
 * off or on). Configuration files are generated (jetstreamConfig); servers are stopped by pid.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup, removeLater } from '../cleanup.js';
import { BenchError, freePortBlock, isAlive, runCommand } from '../procs.js';
import { ensureDebianPackage, spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

const NATS_BINARY = '/usr/sbin/nats-server';

interface NatsNode {
  name: string;
  clientPort: number;
  clusterPort: number;
}

interface JetStreamCluster {
  version: string;
  nodes: Array<NatsNode & { pid: number }>;
  stop(): Promise<void>;
}

/** The configuration file of one server of the cluster: its client and route listeners, its store, every route. */
export function jetstreamConfig(node: NatsNode, all: NatsNode[], storeDir: string, clusterName = 'bench'): string {
  return [
    `server_name: ${node.name}`,
    `listen: 127.0.0.1:${node.clientPort}`,
    'jetstream {',
    `  store_dir: ${JSON.stringify(storeDir)}`,
    '}',
    'cluster {',
    `  name: ${clusterName}`,
    `  listen: 127.0.0.1:${node.clusterPort}`,
    `  routes: [${all.map((n) => `nats://127.0.0.1:${n.clusterPort}`).join(', ')}]`,
    '}',
    '',
  ].join('\n');
}

async function natsVersion(): Promise<string> {
  const r = await runCommand(NATS_BINARY, ['--version'], { timeoutMs: 10_000 });
  return /v(\d+\.\d+\.\d+)/.exec(r.output)?.[1] ?? 'unknown';
}

/**
 * Starts the cluster, on a fresh block of ports up to three times when a server exits at start: the block was free
 * when probed, but another process on the machine (tests run side by side) can take one of its ten ports before
 * the server binds it.
 */
export async function startJetStream(count = 5): Promise<JetStreamCluster> {
  await ensureDebianPackage(NATS_BINARY, 'nats-server');
  const version = await natsVersion();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startJetStreamOnce(count, version);
    } catch (e) {
      if (attempt >= START_ATTEMPTS || !(e instanceof BenchError) || !/exited at start/.test(e.message)) throw e;
      process.stderr.write(`bench: ${e.message}; starting the nats-server cluster again on other ports\n`);
    }
  }
}

const START_ATTEMPTS = 3;

async function startJetStreamOnce(count: number, version: string): Promise<JetStreamCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-jetstream-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop the nats-server cluster', async () => {
    process.stderr.write('bench: stopping the nats-server cluster\n');
    await stopDaemons(daemons);
    await removeDir();
  });
  try {
    const offsets = Array.from({ length: count }, (_, i) => [1 + i, 101 + i]).flat();
    const base = await freePortBlock(offsets);
    const nodes: NatsNode[] = Array.from({ length: count }, (_, i) => ({
      name: `n${i + 1}`,
      clientPort: base + 1 + i,
      clusterPort: base + 101 + i,
    }));
    process.stderr.write(
      `bench: starting ${count} nats-server ${version} with JetStream on 127.0.0.1:${nodes[0]!.clientPort}-${nodes[count - 1]!.clientPort}, data in ${dir}\n`,
    );
    for (const node of nodes) {
      const store = join(dir, node.name);
      mkdirSync(store, { recursive: true });
      const config = join(dir, `${node.name}.conf`);
      writeFileSync(config, jetstreamConfig(node, nodes, store));
      daemons.push(
        spawnDaemon(`nats-server ${node.name}`, NATS_BINARY, ['-c', config], { log: join(dir, `${node.name}.log`) }),
      );
    }
    await Promise.all(nodes.map((n, i) => waitListening(daemons[i]!, n.clientPort)));
    return { version, nodes: nodes.map((n, i) => ({ ...n, pid: daemons[i]!.pid })), stop };
  } catch (e) {
    // The logs go with the directory: keep what a server that exited said, for the error.
    const said = daemons.filter((d) => !isAlive(d.pid)).map((d) => `${d.name}: ${readTail(d.log)}`);
    await stop();
    if (e instanceof BenchError && said.length > 0) throw new BenchError(`${e.message} (${said.join('; ')})`);
    throw e;
  }
}

function readTail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-3).join(' | ').slice(0, 400);
  } catch {
    return '(no log)';
  }
}
