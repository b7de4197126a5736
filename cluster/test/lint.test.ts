/**
 * The repository's habits, checked where `make test` and `make check` see them: Biome's formatter and linter pass
 * over every TypeScript and JavaScript source (biome.jsonc: 120 columns, the recommended rules less those that
 * fight the house style), and the list of test files `make check` leaves out names only files that exist.
 * No processes but Biome itself; `npm run fix` applies the formatting and the safe fixes.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../../', import.meta.url));

const BIOME = join(root, 'node_modules/.bin/biome');

function biomeCi(): Promise<{ code: number; output: string }> {
  const args = ['ci', '--error-on-warnings', '--colors=off', '--max-diagnostics=30', '.'];
  return new Promise((resolve) => {
    execFile(BIOME, args, { cwd: root, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, output: stdout + stderr });
    });
  });
}

t.test('biome ci: formatting and lint rules hold over the sources', async (t) => {
  const { code, output } = await biomeCi();
  if (code !== 0) process.stderr.write(`${output}\nlint.test: npm run fix applies the formatting and the safe fixes\n`);
  t.equal(code, 0, 'no violation (the diagnostics are printed above otherwise)');
  t.match(output, /Checked [1-9]\d* files/, 'Biome read the sources');
});

t.test('scripts/integration-tests.txt names existing test files', async (t) => {
  const listed = readFileSync(join(root, 'scripts/integration-tests.txt'), 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter((line) => line !== '');
  t.ok(listed.length > 0, 'the list is read');
  const missing = listed.filter((path) => !/\/test\/.+\.test\.tsx?$/.test(path) || !existsSync(join(root, path)));
  t.same(missing, [], 'every entry is a test file that exists');
});
