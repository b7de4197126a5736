/**
 * The member process: `node cluster/dist/src/member.js --service kv --id n1 --data DIR --raft 127.0.0.1:7001
 * --http 127.0.0.1:8001 --peers n1=127.0.0.1:7001,n2=...` (omit --peers to join an existing cluster).
 * Logs one JSON object a line on stdout. Stops cleanly on SIGTERM or SIGINT.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { jsonLogger } from '@raftkit/http';
import { exitOnUncaught, stopOnSignals } from './lifecycle.js';
import type { MemberOptions } from './host.js';
import { loadService, serviceNames } from './services.js';

const program = new Command()
  .name('member')
  .requiredOption('--service <name>', `one of ${serviceNames().join(', ')}`)
  .requiredOption('--id <id>', 'this member id')
  .requiredOption('--data <dir>', 'LevelDB directory')
  .requiredOption('--raft <host:port>', 'Raft listen address')
  .requiredOption('--http <host:port>', 'HTTP listen address')
  .option('--peers <list>', 'bootstrap members: id=host:port,...', '')
  .option('--join <list>', 'join a running cluster whose members are id=host:port,...', '')
  .option('--token-file <file>', 'file holding the bearer token')
  .option('--tick-ms <ms>', 'milliseconds per Raft tick', '100')
  .option('--snapshot-every <n>', 'applied entries between snapshots', '100000')
  .parse();

const opts = program.opts<{ service: string; id: string; data: string; raft: string; http: string; peers: string; join: string; tokenFile?: string; tickMs: string; snapshotEvery: string }>();
// Every line carries the term: 0 until the Raft member has started (that is its initial term).
let currentTerm = (): number => 0;
const log = jsonLogger(() => ({ member: opts.id, term: currentTerm(), service: opts.service }));

function fail(message: string): never {
  log.log('error', message);
  process.exit(2);
}

const service = (await loadService(opts.service)) ?? fail(`unknown service ${opts.service}; known: ${serviceNames().join(', ')}`);
const token = process.env.CLUSTER_AUTH_TOKEN || (opts.tokenFile ? readFileSync(opts.tokenFile, 'utf8').trim() : '');
if (token.length === 0) fail('no token: pass --token-file or set CLUSTER_AUTH_TOKEN');
function addressList(text: string, flag: string): Record<string, string> {
  const list: Record<string, string> = {};
  for (const part of text.split(',').filter((p) => p.length > 0)) {
    const [id, address] = part.split('=');
    if (!id || !address) fail(`${flag}: expected id=host:port, got ${part}`);
    list[id] = address;
  }
  return list;
}
const bootstrap = addressList(opts.peers, '--peers');
const peers = addressList(opts.join, '--join');

exitOnUncaught(log);

const memberOptions: MemberOptions = {
  id: opts.id,
  dataDir: opts.data,
  raftAddress: opts.raft,
  httpAddress: opts.http,
  bootstrap,
  peers,
  tokens: [token],
  tickMs: Number(opts.tickMs),
  snapshotEvery: Number(opts.snapshotEvery),
  onFailure: () => void recover(),
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

let member = await service.member(memberOptions).catch((e: unknown) => fail(`could not start: ${String((e as Error)?.message ?? e)}`));
currentTerm = member.term;

stopOnSignals(log, () => member.stop());
