/**
 * scripts/ensure-debian.sh, the package step of `make up` and `make test`: one line for a set of packages however
 * much apt prints, apt's output kept in a log file (and its tail shown when apt fails), nothing when every binary is
 * there. apt-get is a stand-in on PATH that prints 400 lines, so nothing is installed; as root only (the script asks
 * a non-root user to install, which is checked instead).
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const SCRIPT = fileURLToPath(new URL('../../../scripts/ensure-debian.sh', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ensure-debian-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[], aptExit: number): Promise<{ code: number; stdout: string; stderr: string }> {
  // A stand-in apt-get: 400 lines of output, then the given exit status (update and install alike).
  writeFileSync(
    join(dir, 'apt-get'),
    `#!/bin/sh\nfor i in $(seq 1 400); do echo "apt line $i of $*"; done\nexit ${aptExit}\n`,
  );
  chmodSync(join(dir, 'apt-get'), 0o755);
  return new Promise((resolve) => {
    execFile(
      'bash',
      [SCRIPT, ...args],
      { env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, TMPDIR: dir } },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
      },
    );
  });
}

t.test('nothing missing: nothing printed', async (t) => {
  const r = await run([`bash:${process.execPath}`], 0);
  t.same([r.code, r.stdout, r.stderr], [0, '', '']);
});

if (process.getuid?.() !== 0) {
  t.test('not root: one line naming what to install', async (t) => {
    const r = await run(['no-such-package:/nonexistent/binary'], 0);
    t.equal(r.code, 1);
    t.match(r.stderr, /^ensure-debian: missing no-such-package; run as root: apt-get install -y no-such-package\n$/);
  });
} else {
  t.test("apt prints 400 lines: one line for the set, apt's output in a log file", async (t) => {
    const r = await run(['pkg-a:/nonexistent/a', 'pkg-b:/nonexistent/b', `bash:${process.execPath}`], 0);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stderr, '', 'nothing on stderr');
    const lines = r.stdout.trimEnd().split('\n');
    t.equal(lines.length, 1, `one line: ${r.stdout}`);
    const m = /^ensure-debian: installing pkg-a pkg-b \.\.\. done in \d+ s \(apt's output: (\S+)\)$/.exec(lines[0]!);
    t.ok(m, 'naming the packages and the log');
    t.equal(
      readFileSync(m![1]!, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('apt line')).length,
      800,
      "the log holds apt's output (update and install)",
    );
  });
  t.test('apt fails: its last lines on stderr, exit 1', async (t) => {
    const r = await run(['pkg-a:/nonexistent/a'], 100);
    t.equal(r.code, 1);
    t.equal(r.stdout, 'ensure-debian: installing pkg-a ... failed\n');
    t.match(r.stderr, /apt line 400 of update/, "the tail of apt's output");
    t.match(r.stderr, /ensure-debian: apt-get failed; its whole output is in \S+\.log\n$/);
    t.ok(r.stderr.split('\n').length < 40, 'not all 400 lines');
  });
}
