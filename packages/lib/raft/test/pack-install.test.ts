/**
 * The library as another project gets it: the package's sources as a fresh clone has them (no dist/) are packed
 * with `npm pack` (prepack builds), the tarball is installed into a new project outside the repository, and the
 * README's example (examples/embed.ts) is type-checked there under NodeNext and bundler resolution and run as
 * three members over TCP and LevelDB. The tarball holds only the build, the sources and the README, and only the
 * documented entry point can be imported.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

t.setTimeout(240_000);

const packageDir = fileURLToPath(new URL('../../', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../../../../', import.meta.url));
const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
const work = mkdtempSync(join(tmpdir(), 'raft-pack-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

// npm run by tap leaves npm_* variables (prefix, workspace, ...) that would point the commands below back here.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
const run = (cwd: string, command: string, args: string[]): string =>
  execFileSync(command, args, { cwd, env, encoding: 'utf8', timeout: 180_000, stdio: ['ignore', 'pipe', 'pipe'] });

// A fresh clone's copy of the package: what git tracks for the build, and no dist/.
const clone = join(work, 'clone');
mkdirSync(clone);
for (const entry of ['package.json', 'README.md', 'tsconfig.pack.json', 'src', 'examples'])
  cpSync(join(packageDir, entry), join(clone, entry), { recursive: true });
// The build needs TypeScript and @types/node, which a clone gets from `npm ci` at its root.
symlinkSync(join(repoRoot, 'node_modules'), join(clone, 'node_modules'));

let tarball = '';
t.test('npm pack builds dist/ through prepack and packs only the build, the sources and the README', async (t) => {
  const name = run(clone, 'npm', ['pack', '--silent', '--pack-destination', work]).trim().split('\n').pop()!;
  tarball = join(work, name);
  const files = run(work, 'tar', ['tzf', tarball]).trim().split('\n');
  t.ok(files.includes('package/dist/src/index.js'), 'the built entry point');
  t.ok(files.includes('package/dist/src/index.d.ts'), 'its types');
  t.ok(files.includes('package/README.md'), 'the README');
  const stray = files.filter((f) =>
    /^package\/(test|sim|examples|node_modules)\/|tsconfig|tsbuildinfo|\/dist\/(test|sim|examples)\//.test(f),
  );
  t.same(stray, [], 'no tests, simulator, examples, tsconfig or build info');
});

t.test('installed into a project outside the repository, the README example type-checks and runs', async (t) => {
  t.ok(tarball, 'a tarball was packed');
  const project = join(work, 'project');
  mkdirSync(project);
  const typesNode = (
    JSON.parse(readFileSync(join(repoRoot, 'node_modules', '@types', 'node', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({
      name: 'embedder',
      private: true,
      type: 'module',
      dependencies: { '@raftkit/raft': `file:${tarball}` },
      devDependencies: { '@types/node': typesNode },
    }),
  );
  run(project, 'npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--silent']);
  cpSync(join(packageDir, 'examples', 'embed.ts'), join(project, 'embed.ts'));
  writeFileSync(
    join(project, 'main.ts'),
    [
      "import { createServer } from 'node:net';",
      "import { runExample } from './embed.js';",
      'const freePort = (): Promise<number> => new Promise((resolve) => { const s = createServer().listen(0, "127.0.0.1", () => { const { port } = s.address() as { port: number }; s.close(() => resolve(port)); }); });',
      'console.log(JSON.stringify(await runExample([await freePort(), await freePort(), await freePort()])));',
      '',
    ].join('\n'),
  );
  const base = { target: 'ES2022', strict: true, types: ['node'], skipLibCheck: false };
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { ...base, module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'out' },
      include: ['*.ts'],
    }),
  );
  writeFileSync(
    join(project, 'tsconfig.bundler.json'),
    JSON.stringify({
      compilerOptions: { ...base, module: 'ESNext', moduleResolution: 'Bundler', noEmit: true },
      include: ['*.ts'],
    }),
  );
  t.doesNotThrow(
    () => run(project, process.execPath, [tsc, '-p', 'tsconfig.bundler.json']),
    'types resolve under bundler resolution',
  );
  run(project, process.execPath, [tsc, '-p', 'tsconfig.json']);
  t.pass('types resolve and compile under NodeNext');
  const result = JSON.parse(run(project, process.execPath, ['out/main.js']).trim()) as {
    size: number;
    items: string[];
  };
  t.equal(result.size, 2, 'three members replicated both commands');
  t.same(result.items.sort(), ['apple', 'pear']);
  const deep = run(project, process.execPath, [
    '--input-type=module',
    '-e',
    "import('@raftkit/raft/dist/src/core.js').then(() => console.log('exported'), (e) => console.log(e.code))",
  ]).trim();
  t.equal(deep, 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'internal modules are not importable');
  const coreTypes = readFileSync(join(project, 'node_modules', '@raftkit', 'raft', 'dist', 'src', 'core.d.ts'), 'utf8');
  t.notMatch(coreTypes, /mutations\?:|Mutations/, "the simulator's mutation switches are not in the published types");
});
