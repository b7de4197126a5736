/**
 * The packaging in deploy/ is checked, not just written: the systemd unit template passes `systemd-analyze
 * verify` with no warning (and a broken copy of it does not, so the check can fail), its ExecStart and the
 * Dockerfile's entry point name the member process this repository builds, and the example config's keys are
 * flags the member takes. (The image itself is built and run with Podman by container.test.ts; see
 * docs/deployment.md.)
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const unitText = readFileSync(join(repo, 'deploy/systemd/raftkit-member@.service'), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'deploy-files-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function run(command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** systemd-analyze verify of the template as instance n1 (a template alone cannot be started). */
async function verify(text: string, name: string): Promise<{ code: number; stderr: string }> {
  const folder = join(dir, name);
  await run('mkdir', ['-p', folder]);
  const path = join(folder, 'raftkit-member@n1.service');
  writeFileSync(path, text);
  return run('systemd-analyze', ['verify', path]);
}

t.test('the systemd unit template verifies cleanly', async (t) => {
  t.ok(existsSync('/usr/bin/systemd-analyze'), 'systemd-analyze is installed (Debian package systemd)');
  const good = await verify(unitText, 'good');
  t.equal(good.code, 0, 'exit 0');
  t.equal(good.stderr.trim(), '', 'no warning');
  const broken = await verify(
    unitText.replace('LimitNOFILE=', 'LimitNOFILES=').replace('Restart=on-failure', 'Restart=sometimes'),
    'broken',
  );
  t.match(broken.stderr, /LimitNOFILES/, 'a misspelt key is reported (the check can fail)');
  t.match(broken.stderr, /sometimes/, 'and a bad value');
  for (const line of [
    'Restart=on-failure',
    'User=raftkit',
    'LimitNOFILE=65536',
    'NoNewPrivileges=yes',
    'ProtectSystem=strict',
    'StateDirectory=raftkit/%i',
  ]) {
    t.ok(unitText.split('\n').includes(line), `has ${line}`);
  }
});

t.test('the unit and the image run the member process this repository builds, with its config', async (t) => {
  const exec = /^ExecStart=(\S+) (\S+) --config \/etc\/raftkit\/%i\.json$/m.exec(unitText);
  t.ok(exec, 'ExecStart runs node on member.js with the instance config');
  t.equal(exec?.[2], '/opt/raftkit/cluster/dist/src/member.js', 'at the install path of the guide');
  t.ok(existsSync(join(repo, 'cluster/dist/src/member.js')), 'which is where tsc puts the member process');
  const dockerfile = readFileSync(join(repo, 'deploy/Dockerfile'), 'utf8');
  t.match(
    dockerfile,
    /ENTRYPOINT \["node", "\/opt\/raftkit\/cluster\/dist\/src\/member\.js"\]/,
    'the image runs the same file',
  );
  t.match(dockerfile, /RUN npm ci /, 'the image installs from the lock file');
  const ignore = readFileSync(join(repo, '.dockerignore'), 'utf8').split('\n');
  t.ok(
    ignore.includes('**/node_modules') && ignore.includes('**/dist'),
    'the build context leaves out installed and built files',
  );
});

t.test("the example config's keys are the member's flags", async (t) => {
  const config = JSON.parse(readFileSync(join(repo, 'deploy/systemd/n1.json.example'), 'utf8')) as Record<
    string,
    unknown
  >;
  const help = await run(process.execPath, [join(repo, 'cluster/dist/src/member.js'), '--help']);
  t.equal(help.code, 0, 'member --help exits 0');
  for (const key of Object.keys(config)) t.match(help.stdout, new RegExp(`--${key} `), `--${key} is a member flag`);
  t.match(help.stdout, /--force-new-cluster/, 'the help names the recovery flag');
});
