/**
 * The workspace's dependency graph: services stand only on shared packages, never beside each other. A service is
 * a package with the rooms of one (src/machine.ts and src/api.ts); everything else under packages/ is shared. Read
 * from each package.json, tsconfig.json and the sources themselves, so a new service or import is judged too.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const packagesDir = join(root, 'packages');

interface Pkg {
  dir: string;
  name: string;
  deps: string[];
  references: string[];
  service: boolean;
}

const packages: Pkg[] = readdirSync(packagesDir)
  .filter((d) => existsSync(join(packagesDir, d, 'package.json')))
  .map((d) => {
    const dir = join(packagesDir, d);
    const json = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; dependencies?: Record<string, string>; devDependencies?: Record<string, string>; peerDependencies?: Record<string, string> };
    const tsconfig = existsSync(join(dir, 'tsconfig.json')) ? (JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')) as { references?: Array<{ path: string }> }) : {};
    return {
      dir,
      name: json.name,
      deps: Object.keys({ ...json.dependencies, ...json.devDependencies, ...json.peerDependencies }),
      references: (tsconfig.references ?? []).map((r) => `@raftkit/${r.path.split('/').pop()}`),
      service: existsSync(join(dir, 'src', 'machine.ts')) && existsSync(join(dir, 'src', 'api.ts')),
    };
  });
const services = new Set(packages.filter((p) => p.service).map((p) => p.name));
/**
 * The replicated event log is a service and also the ground later services stand on (issues 19 and 20: the feed's
 * post events and the notification queues are its topics, its partitions hosted in their own members through
 * combineGroupedServices). Building on it is using a product, not borrowing plumbing; no other service may be named.
 */
const SUBSTRATE = new Set(['@raftkit/log']);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'dist') continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (path.endsWith('.ts')) out.push(path);
  }
  return out;
}

t.ok(services.size >= 4, `the services are recognised by their rooms: ${[...services].join(', ')}`);
t.ok(packages.some((p) => !p.service && p.name === '@raftkit/http'), 'shared packages are recognised too');

// Every package with a replicated state machine is a service and keeps the same rooms, so a newcomer who knows one
// finds their way in the next.
for (const pkg of packages.filter((p) => existsSync(join(p.dir, 'src', 'machine.ts')))) {
  const missing = ['src/machine.ts', 'src/api.ts', 'src/client.ts', 'README.md'].filter((room) => !existsSync(join(pkg.dir, room)));
  t.same(missing, [], `${pkg.name} has the rooms of a service`);
}

for (const pkg of packages.filter((p) => p.service)) {
  t.test(pkg.name, async (t) => {
    const others = (names: string[]): string[] => names.filter((n) => services.has(n) && n !== pkg.name && !SUBSTRATE.has(n));
    t.same(others(pkg.deps), [], 'package.json names no other service');
    t.same(others(pkg.references), [], 'tsconfig.json references no other service');
    const imports = sources(pkg.dir).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/from '(@raftkit\/[a-z0-9-]+)/g)].map((m) => m[1]!).filter((n) => services.has(n) && n !== pkg.name && !SUBSTRATE.has(n)).map((n) => `${file.slice(root.length)} imports ${n}`),
    );
    t.same(imports, [], 'no source file imports another service');
  });
}
