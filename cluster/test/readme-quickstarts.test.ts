/**
 * Every service README's quickstart, run as written against a cluster this file starts. A README marks the commands
 * of its quickstart as fenced blocks tagged `sh quickstart`; they are run in one bash (`set -eo pipefail`, from the
 * repository root, so `node packages/...` paths resolve), and any command that exits non-zero (the READMEs call
 * curl with --fail-with-body, so an HTTP status of 400 or more is one) fails the case, naming the command.
 *
 * The commands use the service's default ports and data directory (`npx cluster up --service NAME` from the
 * repository root). The one rewrite, so that the test's cluster never collides with a running stack: every
 * `127.0.0.1:PORT` inside the service's default 200-port block moves to the same offset in the test's block, and
 * `data/NAME` becomes the test cluster's data directory. Nothing else of the text changes.
 *
 * One 3-member cluster per service, one at a time, stopped after its case. Covered: every service with a README
 * quickstart, the eleven (video's uploads a 4-s 320x180 clip, so its transcode is one small tier).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { reservePorts } from '@raftkit/testkit';
import { defaultBasePort } from '../src/service-list.js';
import { TestCluster } from './helpers/cluster.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** A service's package folder: under packages/services/, or packages/platform/ for the event log. */
const packageDir = (service: string): string =>
  existsSync(`${ROOT}packages/services/${service}`) ? `packages/services/${service}` : `packages/platform/${service}`;
const COVERED = [
  'kv',
  'lock',
  'ratelimit',
  'shortlink',
  'log',
  'flash',
  'collab',
  'feed',
  'notify',
  'auction',
  'video',
];

t.setTimeout(600_000);

/** The bodies of the README's ```sh quickstart blocks, in order. */
export function quickstartBlocks(readme: string): string[] {
  const out: string[] = [];
  const fence = /^```sh quickstart[ \t]*\n([\s\S]*?)^```[ \t]*$/gm;
  for (let m = fence.exec(readme); m !== null; m = fence.exec(readme)) out.push(m[1]!);
  return out;
}

/** The default ports and data directory of `service` moved to the test cluster's. */
export function rewrite(script: string, service: string, base: number, dataDir: string): string {
  const from = defaultBasePort(service);
  return script
    .replace(/127\.0\.0\.1:(\d+)/g, (whole, port: string) => {
      const p = Number(port);
      return p >= from && p < from + 200 ? `127.0.0.1:${base + (p - from)}` : whole;
    })
    .replace(new RegExp(`(?<![\\w/.-])data/${service}(?![\\w-])`, 'g'), dataDir);
}

function runBash(script: string, timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // ERR trap: the failing command is printed, so a failure names it.
    const child = spawn(
      'bash',
      [
        '-c',
        `set -eo pipefail\ntrap 'echo "quickstart: this command failed (exit $?): $BASH_COMMAND" >&2' ERR\n${script}`,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

t.test('the extraction and the port rewrite', async (t) => {
  const readme =
    'text\n```sh\nnot this\n```\n```sh quickstart\nTOKEN=$(cat data/kv/token)\ncurl http://127.0.0.1:7101/v1/kv/a http://127.0.0.1:7201/x\n```\n';
  const blocks = quickstartBlocks(readme);
  t.same(blocks, ['TOKEN=$(cat data/kv/token)\ncurl http://127.0.0.1:7101/v1/kv/a http://127.0.0.1:7201/x\n']);
  t.equal(
    rewrite(blocks[0]!, 'kv', 20000, '/tmp/d'),
    'TOKEN=$(cat /tmp/d/token)\ncurl http://127.0.0.1:20101/v1/kv/a http://127.0.0.1:7201/x\n',
    "only the service's own block of ports moves",
  );
  t.equal((await runBash('true\nfalse\necho never', 10_000)).code, 1, 'a failing command fails the script');
});

for (const service of COVERED) {
  t.test(`${service}: the README quickstart runs as written`, async (t) => {
    const readme = readFileSync(`${ROOT}${packageDir(service)}/README.md`, 'utf8');
    const blocks = quickstartBlocks(readme);
    t.ok(blocks.length > 0, `${packageDir(service)}/README.md has a \`\`\`sh quickstart block`);
    if (blocks.length === 0) return;
    const ports = await reservePorts();
    const cluster = new TestCluster(ports.base, { service, nodes: 3 });
    t.teardown(async () => {
      await cluster.teardown();
      ports.release();
    });
    await cluster.up();
    const started = Date.now();
    const { code, out } = await runBash(rewrite(blocks.join('\n'), service, ports.base, cluster.dataDir), 180_000);
    t.equal(code, 0, `exit ${code} after ${Date.now() - started} ms:\n${out}`);
  });
}
