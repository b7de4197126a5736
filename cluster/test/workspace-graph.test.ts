/**
 * The workspace's dependency graph: services stand only on shared packages, never beside each other. A service is
 * a package under packages/services/; packages/lib/ and packages/platform/ are shared, each layer standing only on
 * its own and those below. Read
 * from each package.json, tsconfig.json and the sources themselves, so a new service or import is judged too.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../../', import.meta.url));
/** The layers, lowest first: a package may depend on its own layer and those below, never above. */
const LAYERS = ['lib', 'platform', 'services'];

interface Pkg {
  dir: string;
  name: string;
  deps: string[];
  references: string[];
  service: boolean;
  layer: string;
}

const packages: Pkg[] = LAYERS.flatMap((layer) =>
  readdirSync(join(root, 'packages', layer)).map((d) => ({ layer, dir: join(root, 'packages', layer, d) })),
)
  .filter(({ dir }) => existsSync(join(dir, 'package.json')))
  .map(({ layer, dir }) => {
    const json = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      name: string;
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const tsconfig = existsSync(join(dir, 'tsconfig.json'))
      ? (JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')) as { references?: Array<{ path: string }> })
      : {};
    return {
      dir,
      name: json.name,
      deps: Object.keys({ ...json.dependencies, ...json.devDependencies, ...json.peerDependencies }),
      references: (tsconfig.references ?? []).map((r) => `@raftkit/${r.path.split('/').pop()}`),
      service: layer === 'services',
      layer,
    };
  });
const services = new Set(packages.filter((p) => p.service).map((p) => p.name));

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
t.ok(
  packages.some((p) => !p.service && p.name === '@raftkit/http'),
  'shared packages are recognised too',
);

// Every package with a replicated state machine is a service and keeps the same rooms, so a newcomer who knows one
// finds their way in the next.
for (const pkg of packages.filter((p) => existsSync(join(p.dir, 'src', 'machine.ts')))) {
  const missing = ['src/machine.ts', 'src/members/api.ts', 'src/client.ts', 'README.md'].filter(
    (room) => !existsSync(join(pkg.dir, room)),
  );
  t.same(missing, [], `${pkg.name} has the rooms of a service`);
}

for (const pkg of packages.filter((p) => p.service)) {
  t.test(pkg.name, async (t) => {
    const others = (names: string[]): string[] => names.filter((n) => services.has(n) && n !== pkg.name);
    t.same(others(pkg.deps), [], 'package.json names no other service');
    t.same(others(pkg.references), [], 'tsconfig.json references no other service');
    const imports = sources(pkg.dir).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/from '(@raftkit\/[a-z0-9-]+)/g)]
        .map((m) => m[1]!)
        .filter((n) => services.has(n) && n !== pkg.name)
        .map((n) => `${file.slice(root.length)} imports ${n}`),
    );
    t.same(imports, [], 'no source file imports another service');
  });
}

// The layers: a library stands on libraries only, the platform on libraries and itself; nothing names a service
// but the service itself.
const layerOf = new Map(packages.map((p) => [p.name, p.layer]));
for (const pkg of packages) {
  const above = (names: string[]): string[] =>
    names.filter(
      (n) =>
        layerOf.has(n) &&
        n !== pkg.name &&
        LAYERS.indexOf(layerOf.get(n)!) > LAYERS.indexOf(pkg.layer) - (pkg.layer === 'services' ? 1 : 0),
    );
  t.same(above([...pkg.deps, ...pkg.references]), [], `${pkg.name} (${pkg.layer}) depends on nothing above its layer`);
}
