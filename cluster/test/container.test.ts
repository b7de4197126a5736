/**
 * The container image, built and run, for real: deploy/Dockerfile's `prebuilt` target is built with Podman from
 * this tree (scripts/pack-tree.sh) on a Debian bookworm base made from Debian's mirror alone
 * (scripts/make-base-image.sh: mmdebstrap, then podman import; kept between runs), then three members run in
 * containers on their own podman network, each at its own address, from config files with TLS from
 * scripts/make-test-ca.sh. From the host, the `cluster` CLI and a client over https: a leader, a write through a
 * follower read back through the other; the leader's container killed, the other two elect and serve writes and
 * reads; the killed container started again rejoins from its volume with every write.
 *
 * `make container` runs this file with CONTAINER_TARGET=member: the image's default target, built from the sources
 * inside the image (npm ci, tsc), several minutes; `make test` builds the prebuilt one.
 *
 * The commands are docs/deployment.md's (section 5), with the settings this kind of machine needs: the runc
 * runtime (crun refuses cgroups v1 with a controller left on the v2 hierarchy) and explicit --ulimit values no
 * higher than this process's own (without CAP_SYS_RESOURCE, Podman's defaults cannot be set).
 *
 * Needs root; installs podman, runc, netavark, iptables and mmdebstrap from Debian's mirror when missing
 * (scripts/ensure-podman.sh). Nothing is skipped: without them the test fails saying why. The subnet is
 * 10.232.S.0/24 and the names rkc<S>-..., S from this process's testkit port reservation (unique among the test
 * files running now); hosts-netns uses 10.231.x, jepsen-like 10.77.x. Containers, network and image are removed
 * in a teardown and on SIGINT/SIGTERM; the base image is kept.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { ClusterClient } from '@raftkit/http';
import { reservePorts } from '@raftkit/testkit';
import { runCli, type CliResult } from './helpers/cluster.js';

// Building the base on a machine without it (mmdebstrap, about a minute) and the image come first.
t.setTimeout(900_000);

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const script = (name: string): string => join(REPO, 'scripts', name);
const BASE_IMAGE = 'localhost/raftkit-debian:bookworm';
const RAFT_PORT = 7001;
const HTTP_PORT = 8101;
const TOKEN = 'container-test-token-0123456789abcdef';
const IDS = [1, 2, 3];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function sh(command: string, args: string[], timeoutMs = 120_000, env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: 64 << 20, env: env ?? process.env },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      },
    );
  });
}

async function must(command: string, args: string[], timeoutMs?: number, env?: NodeJS.ProcessEnv): Promise<string> {
  const r = await sh(command, args, timeoutMs, env);
  if (r.code !== 0)
    throw new Error(
      `${command} ${args.join(' ')} failed (${r.code}): ${(r.stderr.trim() || r.stdout.trim()).slice(-2000)}`,
    );
  return r.stdout;
}

// Podman as docs/deployment.md runs it here: the runc runtime, limits this process may grant.
const PODMAN_GLOBAL = ['--runtime', 'runc'];
const hardNofile = Number(spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim());
const nofile = Number.isFinite(hardNofile) ? Math.min(65_536, hardNofile) : 65_536;
const ULIMITS = ['--ulimit', `nofile=${nofile}:${nofile}`, '--ulimit', 'nproc=4096:4096'];
const podman = (args: string[], timeoutMs?: number): Promise<string> =>
  must('podman', [...PODMAN_GLOBAL, ...args], timeoutMs);

const ports = await reservePorts();
t.teardown(() => ports.release());
const slot = (ports.base - 20_000) / 200;
const prefix = `rkc${slot}`;
const network = `${prefix}-net`;
const image = `localhost/raftkit-member:test-${slot}-${process.pid}`;
const container = (i: number): string => `${prefix}-n${i}`;
const ip = (i: number): string => `10.232.${slot}.${10 + i}`;
const url = (i: number): string => `https://${ip(i)}:${HTTP_PORT}`;
const endpoints = (ids: number[]): string => ids.map(url).join(',');

const root = mkdtempSync(join(tmpdir(), 'container-'));

/** Removes this slot's containers, network and (at the end) image; each may be gone already. Synchronous. */
function removeContainers(withImage: boolean): void {
  const run = (args: string[]): void =>
    void spawnSync('podman', [...PODMAN_GLOBAL, ...args], { stdio: 'ignore', timeout: 60_000 });
  run(['rm', '--force', '--time', '0', ...IDS.map(container)]);
  run(['network', 'rm', '--force', network]);
  if (withImage) run(['rmi', '--force', image]);
}

let tornDown = false;
function teardown(): void {
  if (tornDown) return;
  tornDown = true;
  removeContainers(true);
  rmSync(root, { recursive: true, force: true });
}
t.teardown(teardown);
process.once('exit', teardown);
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    teardown();
    process.exit(130);
  });
}

if (typeof process.getuid !== 'function' || process.getuid() !== 0)
  throw new Error('this test needs root: it installs podman and runs containers on a network of their own');
await must(script('ensure-podman.sh'), [], 600_000);
// The base: kept when it exists (KEEP=1), else made from Debian's mirror.
await must(script('make-base-image.sh'), [BASE_IMAGE], 600_000, { ...process.env, KEEP: '1' });
// The image: by default deploy/Dockerfile's `prebuilt` target, from this tree as `make build` left it (packed into a
// context folder of its own); `make container` sets CONTAINER_TARGET=member, the default target, which runs npm ci
// and tsc inside with the repository as the context.
const TARGET = process.env.CONTAINER_TARGET ?? 'prebuilt';
if (TARGET !== 'prebuilt' && TARGET !== 'member')
  throw new Error(`CONTAINER_TARGET is prebuilt or member, not ${TARGET}`);
const context = TARGET === 'prebuilt' ? join(root, 'context') : REPO;
if (TARGET === 'prebuilt') await must(script('pack-tree.sh'), [context]);
// Behind a TLS-inspecting proxy the host's npm trusts its CA through NODE_EXTRA_CA_CERTS: the build's npm ci must too.
const extraCa = process.env.NODE_EXTRA_CA_CERTS;
const caArgs =
  TARGET === 'member' && extraCa !== undefined && extraCa !== ''
    ? ['--volume', `${extraCa}:${extraCa}:ro`, '--build-arg', `NODE_EXTRA_CA_CERTS=${extraCa}`]
    : [];
const buildStart = Date.now();
// --layers=false: no intermediate images are kept (the member target's build stage would stay behind, 800 MB).
await podman(
  [
    'build',
    '--layers=false',
    ...ULIMITS,
    ...caArgs,
    '--build-arg',
    `BASE=${BASE_IMAGE}`,
    '--target',
    TARGET,
    '-f',
    join(REPO, 'deploy/Dockerfile'),
    '-t',
    image,
    context,
  ],
  900_000,
);
t.comment(`image (target ${TARGET}) built in ${((Date.now() - buildStart) / 1000).toFixed(1)} s`);
if (TARGET === 'prebuilt') rmSync(context, { recursive: true, force: true });

// The image's user owns the data folders and may read the config (uid and gid as the image has them).
const [uid, gid, nodeVersion] = (
  await podman(['run', '--rm', ...ULIMITS, '--entrypoint', 'sh', image, '-c', 'id -u; id -g; node --version'])
)
  .trim()
  .split('\n')
  .map((l) => l.trim());
if (!/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '') || uid === '0')
  throw new Error(`the image's user is not an unprivileged one: uid ${uid}, gid ${gid}`);

// /etc/raftkit of every member (one folder, mounted read-only): the token, the CA and certificates, the configs.
const etc = join(root, 'etc');
mkdirSync(join(etc, 'tls'), { recursive: true });
const certs = join(root, 'certs');
await must('sh', [script('make-test-ca.sh'), certs, ...IDS.map((i) => `n${i}=${ip(i)}`)]);
for (const f of ['ca.pem', ...IDS.flatMap((i) => [`n${i}.pem`, `n${i}.key`])])
  writeFileSync(join(etc, 'tls', f), spawnSync('cat', [join(certs, f)]).stdout);
writeFileSync(join(etc, 'token'), TOKEN + '\n');
const peers = IDS.map((i) => `n${i}=${ip(i)}:${RAFT_PORT}`).join(',');
for (const i of IDS) {
  const config = {
    service: 'kv',
    id: `n${i}`,
    data: `/var/lib/raftkit/n${i}/db`,
    raft: `0.0.0.0:${RAFT_PORT}`,
    http: `0.0.0.0:${HTTP_PORT}`,
    'advertise-raft': `${ip(i)}:${RAFT_PORT}`,
    'advertise-http': `${ip(i)}:${HTTP_PORT}`,
    peers,
    'token-file': '/etc/raftkit/token',
    'tls-cert': `/etc/raftkit/tls/n${i}.pem`,
    'tls-key': `/etc/raftkit/tls/n${i}.key`,
    'tls-ca': '/etc/raftkit/tls/ca.pem',
  };
  writeFileSync(join(etc, `n${i}.json`), JSON.stringify(config, null, 2));
  mkdirSync(join(root, 'data', `n${i}`), { recursive: true });
  chownSync(join(root, 'data', `n${i}`), Number(uid), Number(gid));
}
// root:raftkit, readable by the group only (the keys and token are secrets); the rest of the tree is searchable.
chmodSync(root, 0o755);
for (const dir of [etc, join(etc, 'tls')]) {
  chownSync(dir, 0, Number(gid));
  chmodSync(dir, 0o750);
  for (const f of readdirSync(dir, { withFileTypes: true })) {
    if (!f.isFile()) continue;
    chownSync(join(dir, f.name), 0, Number(gid));
    chmodSync(join(dir, f.name), 0o640);
  }
}

removeContainers(false); // leftovers of a crashed run in this slot
await podman(['network', 'create', '--disable-dns', '--subnet', `10.232.${slot}.0/24`, network]);

/** Starts member n<i>'s container: its address on the network, /etc/raftkit read-only, its data folder. */
async function startContainer(i: number): Promise<void> {
  await podman([
    'run',
    '--detach',
    '--name',
    container(i),
    '--network',
    network,
    '--ip',
    ip(i),
    ...ULIMITS,
    '--volume',
    `${etc}:/etc/raftkit:ro`,
    '--volume',
    `${join(root, 'data', `n${i}`)}:/var/lib/raftkit/n${i}`,
    image,
    '--config',
    `/etc/raftkit/n${i}.json`,
  ]);
}

async function containerLog(i: number): Promise<string> {
  const r = await sh('podman', [...PODMAN_GLOBAL, 'logs', '--tail', '8', container(i)]);
  return (r.stdout + r.stderr).trim();
}

for (const i of IDS) await startContainer(i);
const ca = spawnSync('cat', [join(certs, 'ca.pem')]).stdout;
const probe = new ClusterClient({ endpoints: IDS.map(url), token: TOKEN, ca, connections: 1 });
t.teardown(() => probe.close());
const cli = (args: string[]): Promise<CliResult> =>
  runCli([...args, '--token', TOKEN, '--ca', join(certs, 'ca.pem')], root, 90_000);

/** Waits until every member in `ids` answers over https and all name the same leader, other than `not`. */
async function waitLeader(ids: number[], not?: string, timeoutMs = 120_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let seen = '';
  while (Date.now() < deadline) {
    const answers = await Promise.all(
      ids.map((i) =>
        probe
          .ask(i - 1, 'GET', '/v1/cluster/status', undefined, { timeoutMs: 2_000 })
          .catch((e: Error) => ({ status: 0, body: e.message })),
      ),
    );
    const leaders = answers.map((a) => (a.status === 200 ? (a.body as { leader_id: string | null }).leader_id : null));
    seen = JSON.stringify(answers.map((a) => a.body));
    if (leaders[0] !== null && leaders[0] !== not && leaders.every((l) => l === leaders[0])) return leaders[0]!;
    await new Promise((r) => setTimeout(r, 300));
  }
  const logs = await Promise.all(ids.map(async (i) => `n${i}: ${await containerLog(i)}`));
  throw new Error(`no agreed leader among ${endpoints(ids)}: ${seen}\n${logs.join('\n')}`);
}

interface Row {
  id: string;
  role: string;
  url: string;
}

async function statusRows(ids: number[]): Promise<{ rows: Row[]; result: CliResult }> {
  const result = await cli(['status', '--endpoints', endpoints(ids), '--json']);
  if (!result.stdout.trim().startsWith('['))
    throw new Error(`status printed no rows: ${result.stdout} ${result.stderr}`);
  return { rows: JSON.parse(result.stdout) as Row[], result };
}

/** A client of one member only: what it answers is that member's doing (a follower forwards writes). */
async function through<T>(i: number, fn: (c: ClusterClient) => Promise<T>): Promise<T> {
  const c = new ClusterClient({ endpoints: [url(i)], token: TOKEN, ca, timeoutMs: 30_000 });
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

t.test('the image runs the member process as an unprivileged user', async (t) => {
  const config = JSON.parse(await podman(['image', 'inspect', image])) as Array<{
    Config: { User: string; Entrypoint: string[] };
  }>;
  t.equal(config[0]!.Config.User, 'raftkit', 'USER raftkit');
  t.same(
    config[0]!.Config.Entrypoint,
    ['node', '/opt/raftkit/cluster/dist/src/member.js'],
    'the entry point is the member process',
  );
  t.not(uid, '0', `uid ${uid}`);
  t.match(nodeVersion, /^v20\./, `Node 20 in the image (${nodeVersion})`);
});

let leader = '';

t.test(
  'three members in containers elect a leader; the CLI on the host sees them over https; a write through a follower',
  async (t) => {
    leader = await waitLeader(IDS);
    const { rows, result } = await statusRows(IDS);
    t.equal(result.code, 0, 'status exits 0');
    t.same(rows.map((r) => r.id).sort(), ['n1', 'n2', 'n3'], 'one row per container, named by the member');
    t.ok(
      rows.every((r) => r.url.startsWith(`https://10.232.${slot}.`)),
      "rows show the containers' https URLs",
    );
    t.equal(rows.filter((r) => r.role === 'leader').length, 1, 'one leader');
    t.equal(rows.find((r) => r.role === 'leader')?.id, leader, `the leader every member names: ${leader}`);
    const [a, b] = IDS.filter((i) => `n${i}` !== leader);
    const put = await through(
      a!,
      (c) => c.call('PUT', '/v1/kv/first', 'through a follower') as Promise<{ revision: number }>,
    );
    t.ok(put.revision > 0, `written through n${a}, a follower`);
    const got = await through(b!, (c) => c.call('GET', '/v1/kv/first') as Promise<{ value: string }>);
    t.equal(got.value, 'through a follower', `read back through n${b}`);
  },
);

t.test("the leader's container killed: the other two elect and serve writes and reads", async (t) => {
  const index = Number(leader.slice(1));
  await podman(['kill', container(index)]);
  // podman shows `stopped` between the process's death and its own clean-up, then `exited`: wait out the clean-up.
  let state = '';
  for (let i = 0; i < 100; i++) {
    state = (await podman(['inspect', '--format', '{{.State.Status}}', container(index)])).trim();
    if (state !== 'stopped') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(state, 'exited', `${container(index)} is ${state}`);
  const rest = IDS.filter((i) => i !== index);
  const next = await waitLeader(rest, leader);
  t.not(next, leader, `a new leader: ${next}`);
  const { rows, result } = await statusRows(IDS);
  t.equal(rows.find((r) => r.url === url(index))?.role, 'unreachable', 'the killed member shows unreachable');
  t.equal(rows.find((r) => r.role === 'leader')?.id, next, 'and the new leader');
  t.match(result.stderr, new RegExp(url(index).replace(/\./g, '\\.')), 'stderr says which endpoint did not answer');
  for (const i of rest) {
    await through(i, (c) => c.call('PUT', `/v1/kv/after-kill-${i}`, `via n${i}`));
  }
  for (const i of rest) {
    for (const j of rest) {
      const got = await through(i, (c) => c.call('GET', `/v1/kv/after-kill-${j}`) as Promise<{ value: string }>);
      t.equal(got.value, `via n${j}`, `n${i} reads the write made through n${j}`);
    }
  }
  t.equal(
    (await through(rest[0]!, (c) => c.call('GET', '/v1/kv/first') as Promise<{ value: string }>)).value,
    'through a follower',
    'the write from before the kill is there',
  );

  // Started again on its volume, it rejoins as a follower and applies what was committed while it was down.
  const target = ((await through(rest[0]!, (c) => c.call('GET', '/v1/cluster/status'))) as { commit_index: number })
    .commit_index;
  await podman(['start', container(index)]);
  await waitLeader(IDS);
  const deadline = Date.now() + 60_000;
  let own = { role: '', applied_index: 0 };
  while (Date.now() < deadline) {
    own = (await probe.ask(index - 1, 'GET', '/v1/cluster/status', undefined, { timeoutMs: 2_000 })).body as typeof own;
    if (own.applied_index >= target) break;
    await new Promise((r) => setTimeout(r, 300));
  }
  t.equal(own.role, 'follower', `${container(index)} started again: a follower`);
  t.ok(
    own.applied_index >= target,
    `it applied up to the commit index of before its start (${own.applied_index} >= ${target})`,
  );
});
