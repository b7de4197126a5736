/**
 * `cluster`: launch, inspect, steer and break local clusters of one service. Run from the repository root as
 * `npx cluster <command>`. Every failure prints one line on stderr and exits non-zero.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import { assertPortFree, callMember, findLeader, memberStatus, signal, sleep, spawnMember, stopProcess } from './processes.js';
import { defaultBasePort, serviceNames } from './services.js';
import {
  CliError,
  findMember,
  isAlive,
  logPath,
  readState,
  readToken,
  resolveDataDir,
  tokenPath,
  writeState,
  type ClusterState,
  type MemberRecord,
} from './state.js';

const program = new Command().name('cluster').description('Launch and break local Raft clusters of one service.');
const dataOption = (): Option => new Option('--data <dir>', 'the cluster data directory (default: $CLUSTER_DATA, or the only one under ./data)');

program
  .command('up')
  .description('start a cluster and wait until it has a leader')
  .addOption(new Option('--service <name>', 'service to run').choices(serviceNames()).default('kv'))
  .option('--nodes <n>', 'number of members', '5')
  .option('--data <dir>', 'data directory (default: data/<service>)')
  .option('--base-port <port>', 'raft ports are base+1.., HTTP ports base+101..')
  .option('--auth-token <token>', 'bearer token clients must send (default: $CLUSTER_AUTH_TOKEN or generated)')
  .option('--tick-ms <ms>', 'milliseconds per Raft tick', '100')
  .option('--snapshot-every <n>', 'applied entries between snapshots (each snapshot compacts the log)', '100000')
  .action(async (o: { service: string; nodes: string; data?: string; basePort?: string; authToken?: string; tickMs: string; snapshotEvery: string }) => {
    const nodes = positiveInt(o.nodes, '--nodes', 1, 15);
    const tickMs = positiveInt(o.tickMs, '--tick-ms', 1, 10_000);
    const snapshotEvery = positiveInt(o.snapshotEvery, '--snapshot-every', 1, 100_000_000);
    const basePort = o.basePort === undefined ? defaultBasePort(o.service) : positiveInt(o.basePort, '--base-port', 1, 65_000 - 200);
    const dataDir = resolve(o.data ?? `data/${o.service}`);
    if (existsSync(`${dataDir}/cluster.json`)) {
      const old = readState(dataDir);
      const running = old.members.filter((m) => isAlive(m.pid));
      if (running.length > 0) {
        throw new CliError(`${dataDir} is held by a running ${old.service} cluster (pids ${running.map((m) => m.pid).join(', ')}); run cluster down --data ${dataDir} first`);
      }
    }
    const ids = Array.from({ length: nodes }, (_, i) => `n${i + 1}`);
    const members: MemberRecord[] = ids.map((id, i) => ({ id, pid: null, raftAddress: `127.0.0.1:${basePort + 1 + i}`, httpAddress: `127.0.0.1:${basePort + 101 + i}` }));
    for (const m of members) {
      for (const address of [m.raftAddress, m.httpAddress]) await assertPortFree('127.0.0.1', Number(address.split(':')[1]));
    }
    mkdirSync(dataDir, { recursive: true });
    const token = o.authToken ?? process.env.CLUSTER_AUTH_TOKEN ?? (existsSync(tokenPath(dataDir)) ? readToken(dataDir) : randomBytes(24).toString('base64url'));
    writeFileSync(tokenPath(dataDir), token + '\n', { mode: 0o600 });
    const state: ClusterState = {
      service: o.service,
      dataDir,
      basePort,
      tickMs,
      snapshotEvery,
      bootstrap: Object.fromEntries(members.map((m) => [m.id, m.raftAddress])),
      members,
    };
    // Ctrl-C while starting stops whatever was started, so nothing is left half-up.
    let interrupted = false;
    const onInterrupt = (): void => {
      interrupted = true;
    };
    process.on('SIGINT', onInterrupt);
    process.on('SIGTERM', onInterrupt);
    try {
      for (const m of members) {
        m.pid = spawnMember(state, m);
        writeState(state);
      }
      process.stderr.write(`started ${nodes} ${o.service} members; waiting for a leader...\n`);
      const deadline = Date.now() + 30_000;
      let leader: string | null = null;
      while (leader === null) {
        if (interrupted) throw new CliError('interrupted: stopped the members that had started', 130);
        if (Date.now() > deadline) throw new CliError(`no leader within 30 s; see the logs in ${dataDir}/n*/member.log`);
        const dead = members.filter((m) => !isAlive(m.pid));
        if (dead.length > Math.floor(nodes / 2)) {
          throw new CliError(`members exited at start (${dead.map((m) => m.id).join(', ')}); see ${logPath(dataDir, dead[0]!.id)}`);
        }
        const statuses = await Promise.all(members.map((m) => memberStatus(m, token, 500)));
        leader = statuses.find((s) => s !== null && s.role === 'leader')?.id ?? null;
        if (leader === null) await sleep(100);
      }
      printEndpoints(state, token, leader);
    } catch (e) {
      await Promise.all(members.map((m) => stopProcess(m.pid, 2_000)));
      for (const m of members) m.pid = null;
      writeState(state);
      throw e;
    } finally {
      process.off('SIGINT', onInterrupt);
      process.off('SIGTERM', onInterrupt);
    }
  });

program
  .command('down')
  .description('stop every member (SIGTERM, then SIGKILL after 5 s)')
  .addOption(dataOption())
  .option('--wipe', 'also delete the data directory')
  .action(async (o: { data?: string; wipe?: boolean }) => {
    const state = openCluster(o.data).state;
    await Promise.all(state.members.map((m) => stopProcess(m.pid)));
    for (const m of state.members) m.pid = null;
    if (o.wipe) {
      rmSync(state.dataDir, { recursive: true, force: true });
      console.log(`stopped and wiped ${state.dataDir}`);
    } else {
      writeState(state);
      console.log(`stopped ${state.members.length} members of ${state.dataDir}`);
    }
  });

program
  .command('status')
  .description('one row per member: pid, role, term, leader, commit, applied, lag, url')
  .addOption(dataOption())
  .option('--json', 'print a JSON array')
  .action(async (o: { data?: string; json?: boolean }) => {
    const { state, token } = openCluster(o.data);
    const rows = await Promise.all(
      state.members
        .filter((m) => !m.removed)
        .map(async (m) => {
          const s = await memberStatus(m, token);
          const alive = isAlive(m.pid);
          return {
            id: m.id,
            pid: alive ? m.pid : null,
            role: s?.role ?? (alive ? 'unreachable' : 'down'),
            term: s?.term ?? null,
            leader: s?.leader_id ?? null,
            commit: s?.commit_index ?? null,
            applied: s?.applied_index ?? null,
            lag: null as number | null,
            url: `http://${m.httpAddress}`,
          };
        }),
    );
    const maxCommit = Math.max(0, ...rows.map((r) => r.commit ?? 0));
    for (const r of rows) r.lag = r.applied === null ? null : maxCommit - r.applied;
    if (o.json) {
      console.log(JSON.stringify(rows, null, 2));
      return;
    }
    printTable(['member', 'pid', 'role', 'term', 'leader', 'commit', 'applied', 'lag', 'url'], rows.map((r) => [r.id, r.pid, r.role, r.term, r.leader, r.commit, r.applied, r.lag, r.url]));
  });

for (const [name, sig, text] of [
  ['kill', 'SIGKILL', 'kill a member (SIGKILL)'],
  ['pause', 'SIGSTOP', 'freeze a member (SIGSTOP)'],
  ['resume', 'SIGCONT', 'unfreeze a member (SIGCONT)'],
] as const) {
  program
    .command(`${name} <member>`)
    .description(text)
    .addOption(dataOption())
    .action(async (ref: string, o: { data?: string }) => {
      const state = openCluster(o.data).state;
      const member = findMember(state, ref);
      signal(member, sig);
      if (sig === 'SIGKILL') {
        while (isAlive(member.pid)) await sleep(20);
        member.pid = null;
        writeState(state);
      }
      console.log(`${name}: ${member.id}`);
    });
}

program
  .command('restart <member>')
  .description('stop a member if it runs, then start it again on its data')
  .addOption(dataOption())
  .action(async (ref: string, o: { data?: string }) => {
    const state = openCluster(o.data).state;
    const member = findMember(state, ref);
    if (member.removed) throw new CliError(`${member.id} was removed from the cluster`);
    await stopProcess(member.pid);
    member.pid = spawnMember(state, member);
    writeState(state);
    console.log(`restarted ${member.id} (pid ${member.pid})`);
  });

program
  .command('partition <groups>')
  .description('cut links between groups, e.g. "1,2|3,4,5" (inside the members\' transports)')
  .addOption(dataOption())
  .action(async (spec: string, o: { data?: string }) => {
    const { state, token } = openCluster(o.data);
    const groups = spec.split('|').map((g) => g.split(',').map((r) => r.trim()).filter((r) => r.length > 0).map((r) => findMember(state, r).id));
    if (groups.length < 2 || groups.some((g) => g.length === 0)) throw new CliError('partition: expected at least two non-empty groups, e.g. "1,2|3,4,5"');
    const all = groups.flat();
    if (new Set(all).size !== all.length) throw new CliError('partition: a member is in two groups');
    for (const group of groups) {
      const blocked = all.filter((id) => !group.includes(id));
      for (const id of group) {
        const answer = await callMember(findMember(state, id), token, 'PUT', '/v1/cluster/partition', { blocked });
        if (answer.status !== 200) process.stderr.write(`warning: ${id} did not take the partition (status ${answer.status})\n`);
      }
    }
    console.log(`partitioned ${groups.map((g) => g.join(',')).join(' | ')}`);
  });

program
  .command('heal')
  .description('restore every link cut by partition')
  .addOption(dataOption())
  .action(async (o: { data?: string }) => {
    const { state, token } = openCluster(o.data);
    for (const m of state.members.filter((x) => !x.removed && isAlive(x.pid))) await callMember(m, token, 'DELETE', '/v1/cluster/partition');
    console.log('healed');
  });

program
  .command('add-node')
  .description('start a new member and add it as a voter (it catches up as a learner first)')
  .addOption(dataOption())
  .action(async (o: { data?: string }) => {
    const { state, token } = openCluster(o.data);
    const n = Math.max(...state.members.map((m) => Number(m.id.slice(1)))) + 1;
    const member: MemberRecord = { id: `n${n}`, pid: null, raftAddress: `127.0.0.1:${state.basePort + n}`, httpAddress: `127.0.0.1:${state.basePort + 100 + n}`, joined: true };
    for (const address of [member.raftAddress, member.httpAddress]) await assertPortFree('127.0.0.1', Number(address.split(':')[1]));
    const leader = await findLeader(state, token);
    member.pid = spawnMember(state, member);
    state.members.push(member);
    writeState(state);
    const answer = await callMember(leader, token, 'POST', '/v1/cluster/members', { id: member.id, address: member.raftAddress }, 60_000);
    if (answer.status !== 200) {
      await stopProcess(member.pid);
      member.pid = null;
      member.removed = true;
      writeState(state);
      throw new CliError(`add-node failed: ${describeAnswer(answer)}`);
    }
    console.log(`added ${member.id}: http://${member.httpAddress}`);
  });

program
  .command('remove-node <member>')
  .description('remove a member from the cluster, then stop it')
  .addOption(dataOption())
  .action(async (ref: string, o: { data?: string }) => {
    const { state, token } = openCluster(o.data);
    const member = findMember(state, ref);
    if (member.removed) throw new CliError(`${member.id} was already removed`);
    const leader = await findLeader(state, token);
    const answer = await callMember(leader, token, 'DELETE', `/v1/cluster/members/${member.id}`, undefined, 30_000);
    if (answer.status !== 200) throw new CliError(`remove-node failed: ${describeAnswer(answer)}`);
    await stopProcess(member.pid);
    member.pid = null;
    member.removed = true;
    writeState(state);
    console.log(`removed ${member.id}`);
  });

program
  .command('transfer-leader <member>')
  .description('hand leadership to a member')
  .addOption(dataOption())
  .action(async (ref: string, o: { data?: string }) => {
    const { state, token } = openCluster(o.data);
    const member = findMember(state, ref);
    const leader = await findLeader(state, token);
    if (leader.id === member.id) {
      console.log(`${member.id} already leads`);
      return;
    }
    const answer = await callMember(leader, token, 'POST', '/v1/cluster/transfer-leader', { to: member.id });
    if (answer.status !== 200) throw new CliError(`transfer-leader failed: ${describeAnswer(answer)}`);
    console.log(`leader is now ${member.id}`);
  });

program
  .command('logs <member>')
  .description("print a member's log (JSON lines)")
  .addOption(dataOption())
  .option('--follow', 'keep printing new lines')
  .action(async (ref: string, o: { data?: string; follow?: boolean }) => {
    const state = openCluster(o.data).state;
    const member = findMember(state, ref);
    const path = logPath(state.dataDir, member.id);
    if (!existsSync(path)) throw new CliError(`no log yet at ${path}`);
    let offset = 0;
    const printFrom = (): Promise<void> =>
      new Promise((done) => {
        const size = statSync(path).size;
        if (size <= offset) return done();
        const stream = createReadStream(path, { start: offset, end: size - 1 });
        offset = size;
        stream.on('end', () => done());
        stream.pipe(process.stdout, { end: false });
      });
    await printFrom();
    if (!o.follow) return;
    let pending = Promise.resolve();
    watch(path, () => {
      pending = pending.then(printFrom);
    });
    await new Promise(() => {}); // until Ctrl-C
  });

/** The cluster a command means (see resolveDataDir) and its token. */
function openCluster(dataOption: string | undefined): { state: ClusterState; token: string } {
  const state = readState(resolveDataDir(dataOption));
  return {
    state,
    get token() {
      return readToken(state.dataDir);
    },
  };
}

function printEndpoints(state: ClusterState, token: string, leader: string): void {
  console.log(`${state.service} cluster up in ${state.dataDir} (leader ${leader})`);
  for (const m of state.members) console.log(`  ${m.id}  http://${m.httpAddress}  raft ${m.raftAddress}  pid ${m.pid}`);
  console.log(`  token: ${token}  (also in ${tokenPath(state.dataDir)}; send "Authorization: Bearer <token>")`);
}

function printTable(header: string[], rows: unknown[][]): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  for (const r of cells) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
}

function describeAnswer(answer: { status: number; body: unknown }): string {
  if (answer.status === 0) return 'the member did not answer';
  const err = (answer.body as { error?: { message?: string } } | null)?.error;
  return `${answer.status} ${err?.message ?? JSON.stringify(answer.body)}`;
}

function positiveInt(text: string, name: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new CliError(`${name} must be an integer from ${min} to ${max}`);
  return n;
}

try {
  await program.parseAsync();
} catch (e) {
  if (e instanceof CliError) {
    process.stderr.write(`cluster: ${e.message}\n`);
    process.exit(e.exitCode);
  }
  throw e;
}
