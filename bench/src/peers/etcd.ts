/**
 * The etcd peer: a real 5-member etcd cluster (Debian's etcd-server, 3.4) on 127.0.0.1, installed with apt-get
 * when /usr/bin/etcd is missing. Default durability: etcd fsyncs its WAL on every commit batch, as we fsync
 * LevelDB; nothing here turns that off. Clients go through etcd's v3 JSON gateway (grpc-gateway) on each
 * member's client port, so both systems are measured over HTTP/1.1 + JSON-ish bodies by the same client.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup, removeLater, trackPid, untrackPid } from '../cleanup.js';
import { fetchJson } from '../http.js';
import { ensureDebianPackage } from './daemon.js';
import { BenchError, freePortBlock, isAlive, runCommand, sleep, stopPid } from '../procs.js';

const ETCD_BINARY = '/usr/bin/etcd';
const APT_PACKAGE = 'etcd-server';

interface EtcdMember {
  name: string;
  pid: number;
  clientUrl: string;
  peerUrl: string;
}

interface EtcdCluster {
  version: string;
  dataDir: string;
  members: EtcdMember[];
  /** The name of the member that leads now. */
  leader(): Promise<string>;
  stop(): Promise<void>;
}

/** Install etcd-server from Debian when the binary is missing; prints what it does. */
function ensureEtcd(): Promise<void> {
  return ensureDebianPackage(ETCD_BINARY, APT_PACKAGE);
}

async function etcdVersion(): Promise<string> {
  const r = await runCommand(ETCD_BINARY, ['--version'], { timeoutMs: 10_000 });
  const m = /etcd Version:\s*(\S+)/.exec(r.output);
  return m ? m[1]! : 'unknown';
}

export async function startEtcd(nodes = 5): Promise<EtcdCluster> {
  await ensureEtcd();
  const version = await etcdVersion();
  const dataDir = mkdtempSync(join(tmpdir(), 'raftkit-bench-etcd-'));
  const removeData = removeLater(dataDir);
  // Client ports base+1..base+n, peer ports base+101..base+100+n.
  const offsets = Array.from({ length: nodes }, (_, i) => [1 + i, 101 + i]).flat();
  const base = await freePortBlock(offsets);
  const members: EtcdMember[] = Array.from({ length: nodes }, (_, i) => ({
    name: `e${i + 1}`,
    pid: 0,
    clientUrl: `http://127.0.0.1:${base + 1 + i}`,
    peerUrl: `http://127.0.0.1:${base + 101 + i}`,
  }));
  const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(',');
  const clusterToken = `raftkit-bench-${randomBytes(4).toString('hex')}`;

  const stop = onCleanup('stop the etcd cluster', async () => {
    process.stderr.write('bench: stopping the etcd cluster and removing its data\n');
    await Promise.all(members.filter((m) => m.pid > 0).map((m) => stopPid(m.pid)));
    for (const m of members) if (m.pid > 0) untrackPid(m.pid);
    await removeData();
  });

  process.stderr.write(
    `bench: starting a ${nodes}-member etcd ${version} cluster on 127.0.0.1 (client ports ${base + 1}-${base + nodes}, data in ${dataDir})\n`,
  );
  try {
    for (const m of members) {
      const dir = join(dataDir, m.name);
      mkdirSync(dir, { recursive: true });
      const log = openSync(join(dataDir, `${m.name}.log`), 'a');
      const args = [
        '--name',
        m.name,
        '--data-dir',
        dir,
        '--listen-client-urls',
        m.clientUrl,
        '--advertise-client-urls',
        m.clientUrl,
        '--listen-peer-urls',
        m.peerUrl,
        '--initial-advertise-peer-urls',
        m.peerUrl,
        '--initial-cluster',
        initialCluster,
        '--initial-cluster-token',
        clusterToken,
        '--initial-cluster-state',
        'new',
        '--logger',
        'zap',
        '--log-level',
        'warn',
      ];
      // Clear ETCD_* variables so nothing from the environment changes the configuration we describe.
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_')));
      const child = spawn(ETCD_BINARY, args, { stdio: ['ignore', log, log], env });
      closeSync(log);
      if (child.pid === undefined) throw new BenchError(`could not start etcd member ${m.name}`);
      m.pid = child.pid;
      trackPid(child.pid);
      child.unref();
    }
    const deadline = Date.now() + 60_000;
    for (;;) {
      const dead = members.filter((m) => !isAlive(m.pid));
      if (dead.length > 0)
        throw new BenchError(
          `etcd member ${dead[0]!.name} exited at start; see ${join(dataDir, dead[0]!.name + '.log')}`,
        );
      const health = await Promise.all(members.map((m) => fetchJson(`${m.clientUrl}/health`)));
      if (health.every((h) => h.status === 200 && (h.body as { health?: unknown } | null)?.health === 'true')) break;
      if (Date.now() > deadline)
        throw new BenchError(`etcd did not become healthy within 60 s; see the logs in ${dataDir}`);
      await sleep(200);
    }
    // Check the JSON gateway path once, through a follower and the leader alike.
    for (const m of members) {
      const r = await fetchJson(`${m.clientUrl}/v3/kv/put`, {
        method: 'POST',
        body: JSON.stringify({ key: b64('bench-check'), value: b64(m.name) }),
        timeoutMs: 10_000,
      });
      const revision = (r.body as { header?: { revision?: unknown } } | null)?.header?.revision;
      if (r.status !== 200 || revision === undefined) {
        throw new BenchError(
          `etcd's JSON gateway did not take POST /v3/kv/put on ${m.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
        );
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }

  const leader = async (): Promise<string> => {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      for (const m of members) {
        const r = await fetchJson(`${m.clientUrl}/v3/maintenance/status`, { method: 'POST', body: '{}' });
        const s = r.body as { header?: { member_id?: string }; leader?: string } | null;
        if (r.status === 200 && s?.leader !== undefined && s.leader === s.header?.member_id) return m.name;
      }
      await sleep(100);
    }
    throw new BenchError('the etcd cluster has no leader');
  };
  return { version, dataDir, members, leader, stop };
}

export function b64(text: string | Buffer): string {
  return Buffer.from(text).toString('base64');
}
