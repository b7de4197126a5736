/**
 * `cluster`: launch, inspect, steer and break local clusters of one service. Run from the repository root as
 * `npx cluster <command>`. Every failure prints one line on stderr and exits non-zero.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import type { WorkerRoles } from '@raftkit/http';
import { ownerOnlyFiles } from '@raftkit/http/owner-only';
import {
  healMembers,
  partitionMembers,
  restartProcess,
  signalProcess,
  wipeWorker,
  type ActionResult,
} from './actions.js';
import {
  assertPortFree,
  callMember,
  findLeader,
  memberStatus,
  sleep,
  spawnMember,
  spawnWorker,
  stopProcess,
  waitHealthy,
} from './processes.js';
import { listClusters, sharedTokens, shownPath } from './list.js';
import { defaultBasePort, MAX_WORKERS, serviceNames, workerPorts } from './service-list.js';
import {
  CliError,
  findMember,
  findProcess,
  isAlive,
  logPath,
  workerLogPath,
  readState,
  readToken,
  resolveDataDir,
  tokenPath,
  writeState,
  type ClusterState,
  type MemberRecord,
  type WorkerRecord,
} from './state.js';
import { remoteMode, remoteOptions, type RemoteFlags } from './remote-flags.js';
import type { RemoteCluster } from './remote.js';
import {
  GROUPS_HEADER,
  groupCells,
  memberRow,
  mergeGroupRows,
  STATUS_HEADER,
  statusCells,
  withLag,
  type GroupedStatus,
  type GroupRow,
  type StatusRow,
} from './views.js';

// Before any I/O: the data folders `up` creates, cluster.json, the logs and the partition file are the owner's
// only (the members and workers it starts set the same for what they write).
ownerOnlyFiles();

const program = new Command().name('cluster').description('Launch and break local Raft clusters of one service.');
const dataOption = (): Option =>
  new Option(
    '--data <dir>',
    'the cluster data directory (default: data/<service> with --service, else $CLUSTER_DATA, else the only one under ./data)',
  );
const serviceOption = (more = ''): Option =>
  new Option('--service <name>', `the cluster of that service in data/<name>, where up and make up start it${more}`);
/** How a command names its cluster (see resolveDataDir). */
interface Target {
  data?: string;
  service?: string;
}

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
  .option(
    '--workers <list>',
    "how many of each of the service's other processes, e.g. app=3,clicks=1 (default: the service's)",
  )
  .option(
    '--set <key=value...>',
    "a setting handed to every worker (each service documents its own); replicas=3|5: a grouped service's replicas per group",
  )
  .action(
    async (o: {
      service: string;
      nodes: string;
      data?: string;
      basePort?: string;
      authToken?: string;
      tickMs: string;
      snapshotEvery: string;
      workers?: string;
      set?: string[];
    }) => {
      const nodes = positiveInt(o.nodes, '--nodes', 1, 15);
      const tickMs = positiveInt(o.tickMs, '--tick-ms', 1, 10_000);
      const snapshotEvery = positiveInt(o.snapshotEvery, '--snapshot-every', 1, 100_000_000);
      const basePort =
        o.basePort === undefined ? defaultBasePort(o.service) : positiveInt(o.basePort, '--base-port', 1, 65_000 - 200);
      const dataDir = resolve(o.data ?? `data/${o.service}`);
      let old: ClusterState | null = null;
      if (existsSync(`${dataDir}/cluster.json`)) {
        old = readState(dataDir);
        const running = [...old.members, ...(old.workers ?? [])].filter((m) => isAlive(m.pid));
        if (running.length > 0) {
          throw new CliError(
            `${dataDir} is held by a running ${old.service} cluster (pids ${running.map((m) => m.pid).join(', ')}); run cluster down --data ${dataDir} first`,
          );
        }
      }
      const ids = Array.from({ length: nodes }, (_, i) => `n${i + 1}`);
      const members: MemberRecord[] = ids.map((id, i) => ({
        id,
        pid: null,
        raftAddress: `127.0.0.1:${basePort + 1 + i}`,
        httpAddress: `127.0.0.1:${basePort + 101 + i}`,
      }));
      // Only `up` needs the service itself (its worker roles); other commands never load the service packages.
      const { loadService } = await import('./services.js');
      const service = (await loadService(o.service))!;
      const workers = planWorkers(service.workers, o.service, basePort, o.workers);
      const settings = parseSettings(o.set ?? []);
      // Not a worker setting: the members' (their groups' replica count). Kept from the folder's last `up` when not
      // given, so a cluster started again without it keeps its count.
      const { replicasProblem } = await import('@raftkit/http');
      const replicas = replicaCount(
        settings.replicas,
        old?.replicas,
        { service: o.service, ...service, nodes },
        replicasProblem,
      );
      delete settings.replicas;
      for (const m of members) {
        for (const address of [m.raftAddress, m.httpAddress])
          await assertPortFree('127.0.0.1', Number(address.split(':')[1]));
      }
      for (const w of workers) {
        for (const address of [w.httpAddress, w.tcpAddress])
          await assertPortFree('127.0.0.1', Number(address.split(':')[1]));
      }
      mkdirSync(dataDir, { recursive: true });
      const token =
        o.authToken ??
        process.env.CLUSTER_AUTH_TOKEN ??
        (existsSync(tokenPath(dataDir)) ? readToken(dataDir) : randomBytes(24).toString('base64url'));
      writeFileSync(tokenPath(dataDir), token + '\n', { mode: 0o600 });
      const state: ClusterState = {
        service: o.service,
        dataDir,
        basePort,
        tickMs,
        snapshotEvery,
        bootstrap: Object.fromEntries(members.map((m) => [m.id, m.raftAddress])),
        members,
        workers,
        settings,
        ...(replicas !== undefined ? { replicas } : {}),
        ...(service.memberNodeFlags.length > 0 ? { memberNodeFlags: [...service.memberNodeFlags] } : {}),
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
          if (Date.now() > deadline)
            throw new CliError(`no leader within 30 s; see the logs in ${dataDir}/n*/member.log`);
          const dead = members.filter((m) => !isAlive(m.pid));
          if (dead.length > Math.floor(nodes / 2)) {
            throw new CliError(
              `members exited at start (${dead.map((m) => m.id).join(', ')}); see ${logPath(dataDir, dead[0]!.id)}`,
            );
          }
          const statuses = await Promise.all(members.map((m) => memberStatus(m, token, 500)));
          leader = statuses.find((s) => s !== null && s.role === 'leader')?.id ?? null;
          if (leader === null) await sleep(100);
          // A grouped service (the log): also wait until every member has registered in the meta group, so groups
          // created right after `up` are placed on all of them.
          const grouped = statuses.find((s) => s?.id === leader) as GroupedStatus | undefined;
          if (leader !== null && typeof grouped?.groups === 'number') {
            const answer = await callMember(
              members.find((m) => m.id === leader)!,
              token,
              'GET',
              '/v1/cluster/hosts',
              undefined,
              1_000,
            );
            const hosts = (answer.body as { hosts?: unknown[] } | null)?.hosts;
            if (answer.status !== 200 || !Array.isArray(hosts) || hosts.length < nodes) {
              leader = null;
              await sleep(100);
            }
          }
        }
        // Role by role, in the service's order: a role may need the ones before it (analytics needs the click log's hosts).
        for (const role of [...new Set(workers.map((w) => w.role))]) {
          const group = workers.filter((w) => w.role === role);
          for (const w of group) {
            w.pid = spawnWorker(state, w);
            writeState(state);
          }
          for (const w of group) {
            if (interrupted) throw new CliError('interrupted: stopped the processes that had started', 130);
            await waitHealthy(state, w);
          }
        }
        printEndpoints(state, token, leader);
      } catch (e) {
        await Promise.all(workers.map((w) => stopProcess(w.pid, 2_000)));
        await Promise.all(members.map((m) => stopProcess(m.pid, 2_000)));
        for (const m of [...members, ...workers]) m.pid = null;
        writeState(state);
        throw e;
      } finally {
        process.off('SIGINT', onInterrupt);
        process.off('SIGTERM', onInterrupt);
      }
    },
  );

program
  .command('down')
  .description('stop every worker, then every member (SIGTERM, then SIGKILL after 5 s)')
  .addOption(dataOption())
  .addOption(serviceOption())
  .option('--wipe', 'also delete the data directory')
  .action(async (o: Target & { wipe?: boolean }) => {
    const state = openCluster(o).state;
    await Promise.all((state.workers ?? []).map((w) => stopProcess(w.pid)));
    await Promise.all(state.members.map((m) => stopProcess(m.pid)));
    for (const m of [...state.members, ...(state.workers ?? [])]) m.pid = null;
    if (o.wipe) {
      rmSync(state.dataDir, { recursive: true, force: true });
      console.log(`stopped and wiped ${state.dataDir}`);
    } else {
      writeState(state);
      const workers = state.workers?.length ?? 0;
      console.log(
        `stopped ${state.members.length} members${workers > 0 ? ` and ${workers} workers` : ''} of ${state.dataDir}`,
      );
    }
  });

remoteOptions(
  program
    .command('status')
    .description('one row per member: pid, role, term, leader, commit, applied, lag, url')
    .addOption(dataOption())
    .addOption(serviceOption())
    .option('--json', 'print a JSON array'),
).action(async (o: RemoteFlags & Target & { json?: boolean }) => {
  const remote = await runRemote(o, async (remote, { remoteStatusRows }) => {
    const { rows, failures } = await remoteStatusRows(remote);
    printRows(rows, o.json);
    for (const f of failures) process.stderr.write(`warning: ${f.url}: ${f.error}\n`);
    if (failures.length === rows.length) throw new CliError('no endpoint answered');
  });
  if (remote) return;
  const { state, token } = openCluster(o);
  const rows: StatusRow[] = await Promise.all(
    state.members
      .filter((m) => !m.removed)
      .map(async (m) => {
        const s = (await memberStatus(m, token)) as GroupedStatus | null;
        const alive = isAlive(m.pid);
        return memberRow(m.id, alive ? m.pid : null, s, alive ? 'unreachable' : 'down', `http://${m.httpAddress}`);
      }),
  );
  withLag(rows);
  for (const w of state.workers ?? []) {
    const alive = isAlive(w.pid);
    rows.push({
      id: w.id,
      pid: alive ? w.pid : null,
      role: alive ? `worker:${w.role}` : 'down',
      term: null,
      leader: null,
      commit: null,
      applied: null,
      lag: null,
      groups: null,
      leaders: null,
      replicas: null,
      url: `http://${w.httpAddress}`,
    });
  }
  printRows(rows, o.json);
});

function printRows(rows: StatusRow[], json: boolean | undefined): void {
  if (json) console.log(JSON.stringify(rows, null, 2));
  else printTable(STATUS_HEADER, rows.map(statusCells));
}

remoteOptions(
  program
    .command('groups')
    .description('one row per Raft group: leader, term, commit, lag (highest commit minus lowest applied), members')
    .addOption(dataOption())
    .addOption(serviceOption("; with --endpoints: the name of a single-group service's one group (default raft)"))
    .option('--json', 'print a JSON array'),
).action(async (o: RemoteFlags & Target & { json?: boolean }) => {
  let rows: GroupRow[] = [];
  const remote = await runRemote(o, async (remote, { remoteGroupRows }) => {
    rows = await remoteGroupRows(remote, o.service ?? 'raft');
  });
  if (!remote) {
    const { state, token } = openCluster(o);
    rows = await groupRows(state, token);
  }
  if (o.json) {
    console.log(JSON.stringify(rows, null, 2));
    return;
  }
  printTable(GROUPS_HEADER, rows.map(groupCells));
});

program
  .command('balance')
  .description("spread the groups' leaders evenly over the members by leadership transfer; prints what moved")
  .addOption(dataOption())
  .addOption(serviceOption())
  .option('--json', 'print the moves and the leader counts as JSON')
  .action(async (o: Target & { json?: boolean }) => {
    const { state, token } = openCluster(o);
    const live = state.members.filter((m) => !m.removed && isAlive(m.pid));
    const statuses = (await Promise.all(live.map((m) => memberStatus(m, token, 5_000)))) as Array<GroupedStatus | null>;
    if (!statuses.some((s) => typeof s?.groups === 'number')) {
      if (o.json) console.log(JSON.stringify({ moved: [], leaders: null }));
      else console.log(`${state.service} runs one Raft group: nothing to balance (transfer-leader moves its leader)`);
      return;
    }
    // Each member hands away groups it leads while it leads 2+ more than one of their other voters; it is told
    // every member's own count (exact), and the counts follow the moves, so rounds converge.
    const counts: Record<string, number> = {};
    live.forEach((m, i) => (counts[m.id] = statuses[i]?.leaders ?? 0));
    const moved: Array<{ group: string; from: string; to: string }> = [];
    for (let round = 0; round < 5; round++) {
      let movedThisRound = 0;
      for (const m of [...live].sort((a, b) => counts[b.id]! - counts[a.id]!)) {
        const answer = await callMember(m, token, 'POST', '/v1/cluster/balance', { leaders: counts }, 120_000);
        if (answer.status !== 200) {
          process.stderr.write(`warning: ${m.id} did not balance (${describeAnswer(answer)})\n`);
          continue;
        }
        for (const move of (answer.body as { moved: Array<{ group: string; from: string; to: string }> }).moved) {
          moved.push(move);
          movedThisRound++;
          counts[move.from] = (counts[move.from] ?? 0) - 1;
          counts[move.to] = (counts[move.to] ?? 0) + 1;
          if (!o.json) console.log(`moved ${move.group}: ${move.from} -> ${move.to}`);
        }
      }
      if (movedThisRound === 0) break;
    }
    if (o.json) {
      console.log(JSON.stringify({ moved, leaders: counts }, null, 2));
      return;
    }
    const spread = Object.entries(counts)
      .map(([id, n]) => `${id}=${n}`)
      .join(' ');
    console.log(
      moved.length === 0
        ? `leaders already balanced: ${spread}`
        : `moved ${moved.length} leaders; leaders now ${spread}`,
    );
  });

for (const [name, text] of [
  ['kill', 'kill a member (SIGKILL)'],
  ['pause', 'freeze a member (SIGSTOP)'],
  ['resume', 'unfreeze a member (SIGCONT)'],
] as const) {
  program
    .command(`${name} <member>`)
    .description(text)
    .addOption(dataOption())
    .addOption(serviceOption())
    .action(async (ref: string, o: Target) => {
      const state = openCluster(o).state;
      printAction(await signalProcess(state, name, ref, 'cli'));
    });
}

program
  .command('restart <member>')
  .description('stop a member or worker if it runs, then start it again on its data')
  .addOption(dataOption())
  .addOption(serviceOption())
  .action(async (ref: string, o: Target) => {
    const state = openCluster(o).state;
    printAction(await restartProcess(state, ref, 'cli'));
  });

program
  .command('wipe <worker>')
  .description('a worker that lost its disk: SIGKILL it, delete its data folder (not its log), start it empty')
  .addOption(dataOption())
  .addOption(serviceOption())
  .action(async (ref: string, o: Target) => {
    const state = openCluster(o).state;
    printAction(await wipeWorker(state, ref, 'cli'));
  });

program
  .command('partition <groups>')
  .description('cut links between groups, e.g. "1,2|3,4,5" (inside the members\' transports)')
  .addOption(dataOption())
  .addOption(serviceOption())
  .action(async (spec: string, o: Target) => {
    const { state, token } = openCluster(o);
    const sides = spec.split('|').map((g) =>
      g
        .split(',')
        .map((r) => r.trim())
        .filter((r) => r.length > 0),
    );
    printAction(await partitionMembers(state, token, sides, 'cli'));
  });

program
  .command('heal')
  .description('restore every link cut by partition')
  .addOption(dataOption())
  .addOption(serviceOption())
  .action(async (o: Target) => {
    const { state, token } = openCluster(o);
    printAction(await healMembers(state, token, 'cli'));
  });

program
  .command('list')
  .description(
    'every cluster under the data root: its service, processes running, the HTTP address to call, its token file',
  )
  .option('--data-root <dir>', 'folder whose sub-folders hold clusters', 'data')
  .option('--json', 'print a JSON array')
  .action((o: { dataRoot: string; json?: boolean }) => {
    const clusters = listClusters(resolve(o.dataRoot));
    if (o.json) {
      console.log(JSON.stringify(clusters, null, 2));
      return;
    }
    if (clusters.length === 0)
      throw new CliError(`no cluster under ${o.dataRoot} (start one with: cluster up, or make up)`);
    printTable(
      ['service', 'running', 'entry point', 'token file'],
      clusters.map((c) => [
        c.cluster === c.service ? c.service : `${c.cluster} (${c.service})`,
        `${c.running}/${c.processes}`,
        `${c.entry.url} (${c.entry.id})`,
        shownPath(c.tokenFile),
      ]),
    );
    for (const names of sharedTokens(clusters)) {
      process.stderr.write(
        `warning: ${names.join(', ')} share one token, so a key derived from one (client token, tenant key, user key) is valid on the others. ` +
          'Unless you chose that (CLUSTER_AUTH_TOKEN), stop them, delete their token files and start them again: each makes its own, and keys derived from the old one stop working.\n',
      );
    }
  });

program
  .command('dashboard')
  .description('serve the live web dashboard of every cluster under the data root (loopback, token-protected)')
  .option('--data-root <dir>', 'folder whose sub-folders hold clusters', 'data')
  .option('--host <host>', 'address to listen on', '127.0.0.1')
  .option('--port <port>', 'port to listen on', '6900')
  .option(
    '--auth-token-file <file>',
    "file holding the page's login secret (default: $DASHBOARD_AUTH_TOKEN, else <data-root>/dashboard.token, made when missing)",
  )
  .option(
    '--auth-token <token>',
    'the login secret itself (shows in ps: prefer --auth-token-file or $DASHBOARD_AUTH_TOKEN)',
  )
  .option('--jepsen-dir <dir>', 'folder of jepsen-like runs to list', 'jepsen-out')
  .option(
    '--endpoints <urls>',
    "also show a cluster on other hosts, read-only: its members' HTTP URLs (https://10.0.0.1:8101,...)",
  )
  .option('--ca <file>', "with --endpoints: PEM of the CA that signed the members' certificates")
  .option('--name <name>', 'with --endpoints: the name the remote cluster is shown under (default remote)')
  .action(
    async (o: {
      dataRoot: string;
      host: string;
      port: string;
      authToken?: string;
      authTokenFile?: string;
      jepsenDir: string;
      endpoints?: string;
      ca?: string;
      name?: string;
    }) => {
      const port = positiveInt(o.port, '--port', 0, 65_535);
      // Loaded only here: every other command would pay for the server's modules at start.
      const { runDashboardCommand } = await import('./dashboard/command.js');
      await runDashboardCommand({
        dataRoot: resolve(o.dataRoot),
        host: o.host,
        port,
        authToken: o.authToken,
        authTokenFile: o.authTokenFile,
        jepsenDir: resolve(o.jepsenDir),
        endpoints: o.endpoints,
        ca: o.ca,
        name: o.name,
      });
    },
  );

remoteOptions(
  program
    .command('add-node')
    .description(
      'start a new member and add it as a voter (it catches up as a learner first); with --endpoints, add a member already started on its host with --join',
    )
    .addOption(dataOption())
    .addOption(serviceOption())
    .option('--id <id>', "with --endpoints: the new member's id")
    .option('--raft-address <host:port>', "with --endpoints: the new member's advertised Raft address"),
).action(async (o: RemoteFlags & Target & { id?: string; raftAddress?: string }) => {
  const remote = await runRemote(o, async (remote, { remoteAddNode, checkMemberId, checkRaftAddress }) => {
    if (o.id === undefined || o.raftAddress === undefined)
      throw new CliError(
        'add-node --endpoints needs --id and --raft-address of the member started on its host with --join',
      );
    console.log(await remoteAddNode(remote, checkMemberId(o.id), checkRaftAddress(o.raftAddress)));
  });
  if (remote) return;
  if (o.id !== undefined || o.raftAddress !== undefined)
    throw new CliError('--id and --raft-address go with --endpoints; a local add-node picks them');
  const { state, token } = openCluster(o);
  const n = Math.max(...state.members.map((m) => Number(m.id.slice(1)))) + 1;
  const member: MemberRecord = {
    id: `n${n}`,
    pid: null,
    raftAddress: `127.0.0.1:${state.basePort + n}`,
    httpAddress: `127.0.0.1:${state.basePort + 100 + n}`,
    joined: true,
  };
  for (const address of [member.raftAddress, member.httpAddress])
    await assertPortFree('127.0.0.1', Number(address.split(':')[1]));
  const leader = await findLeader(state, token);
  member.pid = spawnMember(state, member);
  state.members.push(member);
  writeState(state);
  const answer = await callMember(
    leader,
    token,
    'POST',
    '/v1/cluster/members',
    { id: member.id, address: member.raftAddress },
    60_000,
  );
  if (answer.status !== 200) {
    await stopProcess(member.pid);
    member.pid = null;
    member.removed = true;
    writeState(state);
    throw new CliError(`add-node failed: ${describeAnswer(answer)}`);
  }
  console.log(`added ${member.id}: http://${member.httpAddress}`);
});

remoteOptions(
  program
    .command('remove-node <member>')
    .description(
      'remove a member from the cluster, then stop it (with --endpoints: the member id; its process is left to its host)',
    )
    .addOption(dataOption())
    .addOption(serviceOption()),
).action(async (ref: string, o: RemoteFlags & Target) => {
  if (
    await runRemote(o, async (remote, { remoteRemoveNode, checkMemberId }) =>
      console.log(await remoteRemoveNode(remote, checkMemberId(ref))),
    )
  )
    return;
  const { state, token } = openCluster(o);
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

remoteOptions(
  program
    .command('transfer-leader <member>')
    .description('hand leadership to a member (with --endpoints: its id)')
    .addOption(dataOption())
    .addOption(serviceOption()),
).action(async (ref: string, o: RemoteFlags & Target) => {
  if (
    await runRemote(o, async (remote, { remoteTransferLeader, checkMemberId }) =>
      console.log(await remoteTransferLeader(remote, checkMemberId(ref))),
    )
  )
    return;
  const { state, token } = openCluster(o);
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
  .description("print a member's or worker's log (JSON lines)")
  .addOption(dataOption())
  .addOption(serviceOption())
  .option('--follow', 'keep printing new lines')
  .action(async (ref: string, o: Target & { follow?: boolean }) => {
    const state = openCluster(o).state;
    const found = findProcess(state, ref);
    const path =
      found.kind === 'worker' ? workerLogPath(state.dataDir, found.record.id) : logPath(state.dataDir, found.record.id);
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

/**
 * Remote mode of a command (src/remote.ts), loaded only with --endpoints: it brings the HTTP client a local call
 * does without. Says false in local mode.
 */
async function runRemote(
  o: RemoteFlags,
  work: (remote: RemoteCluster, module: typeof import('./remote.js')) => Promise<void>,
): Promise<boolean> {
  if (!remoteMode(o)) return false;
  const module = await import('./remote.js');
  return module.RemoteCluster.run(o, (remote) => work(remote, module));
}

/** Every group of the cluster, from each live member (see views.ts mergeGroupRows). */
async function groupRows(state: ClusterState, token: string): Promise<GroupRow[]> {
  const live = state.members.filter((m) => !m.removed && isAlive(m.pid));
  const answers = await Promise.all(
    live.map((m) => callMember(m, token, 'GET', '/v1/cluster/groups', undefined, 10_000)),
  );
  return mergeGroupRows(answers, () => Promise.all(live.map((m) => memberStatus(m, token, 5_000))), state.service);
}

/** The cluster a command means (see resolveDataDir) and its token. */
function openCluster(target: Target): { state: ClusterState; token: string } {
  const state = readState(resolveDataDir(target.data, target.service));
  return {
    state,
    get token() {
      return readToken(state.dataDir);
    },
  };
}

/** A fault action's output, as the commands always printed it. */
function printAction(result: ActionResult): void {
  for (const w of result.warnings) process.stderr.write(w + '\n');
  console.log(result.message);
}

function printEndpoints(state: ClusterState, token: string, leader: string): void {
  console.log(`${state.service} cluster up in ${state.dataDir} (leader ${leader})`);
  for (const m of state.members) console.log(`  ${m.id}  http://${m.httpAddress}  raft ${m.raftAddress}  pid ${m.pid}`);
  for (const w of state.workers ?? [])
    console.log(`  ${w.id}  http://${w.httpAddress}  tcp ${w.tcpAddress}  pid ${w.pid}  (${w.role})`);
  console.log(`  token: ${token}  (also in ${tokenPath(state.dataDir)}; send "Authorization: Bearer <token>")`);
}

/** The worker records of a new cluster: the service's roles in order, counts from --workers where given. */
function planWorkers(roles: WorkerRoles, service: string, basePort: number, spec: string | undefined): WorkerRecord[] {
  const counts = new Map(roles.map((r) => [r.role, r.count]));
  for (const part of (spec ?? '').split(',').filter((p) => p.length > 0)) {
    const m = /^([a-z][a-z0-9_-]*)=(\d+)$/.exec(part.trim());
    if (m === null) throw new CliError(`--workers: expected role=N, got ${part}`);
    if (!counts.has(m[1]!))
      throw new CliError(
        `--workers: ${service} has no role ${m[1]} (roles: ${roles.map((r) => r.role).join(', ') || 'none'})`,
      );
    counts.set(m[1]!, Number(m[2]));
  }
  const total = roles.reduce((sum, r) => sum + counts.get(r.role)!, 0);
  if (total > MAX_WORKERS) throw new CliError(`--workers: at most ${MAX_WORKERS} workers in all, asked for ${total}`);
  const workers: WorkerRecord[] = [];
  // Places in the block: a role with a slot starts there, the others at the next free place after the roles
  // before them; a taken place is skipped either way.
  const taken = new Set<number>();
  let next = 1;
  for (const r of roles) {
    let place = r.slot ?? next;
    for (let index = 1; index <= counts.get(r.role)!; index++) {
      while (taken.has(place)) place++;
      // Past the block's end: the lowest free place (there is one: the total was checked above).
      if (place > MAX_WORKERS) place = Array.from({ length: MAX_WORKERS }, (_, i) => i + 1).find((p) => !taken.has(p))!;
      taken.add(place);
      const ports = workerPorts(basePort, place);
      place++;
      const record: WorkerRecord = {
        id: `${r.role}${index}`,
        role: r.role,
        index,
        pid: null,
        httpAddress: `127.0.0.1:${ports.http}`,
        tcpAddress: `127.0.0.1:${ports.tcp}`,
      };
      if (r.nodeFlags !== undefined && r.nodeFlags.length > 0) record.nodeFlags = [...r.nodeFlags];
      workers.push(record);
    }
    if (r.slot === undefined) next = place;
  }
  return workers;
}

/**
 * The replica count of a grouped service's new groups: `given` (from --set replicas=N) checked against the service
 * and the member count, else the count recorded by the folder's last `up`; undefined: the service's own.
 */
function replicaCount(
  given: string | undefined,
  recorded: number | undefined,
  { service, grouped, nodes }: { service: string; grouped: boolean; nodes: number },
  replicasProblem: (replicas: number, members: number) => string | null,
): number | undefined {
  if (given === undefined) {
    const problem = recorded === undefined ? null : replicasProblem(recorded, nodes);
    if (problem !== null) throw new CliError(`--set replicas: the folder records ${recorded}: ${problem}; set another`);
    return recorded;
  }
  if (!grouped)
    throw new CliError(
      `--set replicas: ${service} runs one Raft group on every member (its replicas are the --nodes); the count is for grouped services`,
    );
  const n = /^[0-9]{1,2}$/.test(given) ? Number(given) : Number.NaN;
  const problem = Number.isNaN(n) ? `replicas must be 3 or 5, not ${JSON.stringify(given)}` : replicasProblem(n, nodes);
  if (problem !== null) throw new CliError(`--set replicas: ${problem}`);
  return n;
}

function parseSettings(pairs: string[]): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const pair of pairs) {
    const m = /^([A-Za-z][A-Za-z0-9_.-]*)=(.*)$/.exec(pair);
    if (m === null) throw new CliError(`--set: expected key=value, got ${pair}`);
    settings[m[1]!] = m[2]!;
  }
  return settings;
}

function printTable(header: string[], rows: unknown[][]): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  for (const r of cells)
    console.log(
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
}

function describeAnswer(answer: { status: number; body: unknown }): string {
  if (answer.status === 0) return 'the member did not answer';
  const err = (answer.body as { error?: { message?: string } } | null)?.error;
  return `${answer.status} ${err?.message ?? JSON.stringify(answer.body)}`;
}

function positiveInt(text: string, name: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new CliError(`${name} must be an integer from ${min} to ${max}`);
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
