/**
 * The API reference is generated from the doc comments (TypeDoc, `npm run docs` in packages/lib/raft, into
 * dist/api). Every exported class, function, interface and type must be documented and every link must resolve:
 * typedoc.json treats a warning as an error, so an undocumented export fails this test.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

t.setTimeout(120_000);

const packageDir = fileURLToPath(new URL('../../', import.meta.url));
const typedoc = join(packageDir, '..', '..', '..', 'node_modules', 'typedoc', 'bin', 'typedoc');

t.test('the API reference builds with every export documented', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'raft-api-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  let output = '';
  try {
    output = execFileSync(process.execPath, [typedoc, '--out', out], {
      cwd: packageDir,
      encoding: 'utf8',
      timeout: 100_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    t.fail(`typedoc failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    return;
  }
  t.notMatch(output, /warning/i, 'no warnings');
  for (const page of [
    'classes/RaftNode.html',
    'classes/RaftCore.html',
    'classes/TcpTransport.html',
    'classes/LevelStorage.html',
    'interfaces/StateMachine.html',
    'classes/ApplyError.html',
  ]) {
    t.ok(existsSync(join(out, page)), page);
  }
  t.match(
    readFileSync(join(out, 'interfaces', 'StateMachine.html'), 'utf8'),
    /Throwing refuses the command/,
    'the contract is on the StateMachine page',
  );
});
