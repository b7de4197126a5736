/**
 * A test process that ends without bringing its cluster down (a timeout, a failure before its teardown) still
 * stops it: testkit's startCluster brings every cluster it started down as the process exits.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import t from 'tap';
import { request } from 'undici';

const run = promisify(execFile);

t.test('a cluster left running by a test process is down once that process exits', async (t) => {
  const script = [
    "const kit = await import('@raftkit/testkit');",
    "const c = await kit.startCluster('kv', { nodes: 1 });",
    'console.log(JSON.stringify({ dataDir: c.dataDir, member: c.members[0] }));',
    'process.exit(0);',
  ].join('\n');
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
  const started = JSON.parse(stdout.trim().split('\n').pop()!) as { dataDir: string; member: string };
  t.notOk(existsSync(started.dataDir), 'its data folder is gone');
  const answer = await request(`${started.member}/v1/cluster/status`, { headersTimeout: 2_000 }).then(
    async (r) => (await r.body.dump(), `status ${r.statusCode}`),
    (e: unknown) => (e as { code?: string }).code ?? String(e),
  );
  t.equal(answer, 'ECONNREFUSED', 'its member no longer answers');
});
