/**
 * The import graph inside every TypeScript project of the repository (each directory with a tsconfig.json): its
 * relative imports, read from the sources (tests left out), must form no circle, and raft's lower layers must not
 * import its upper ones (the transport, storage and codec never import the groups layer; the codec imports neither
 * the transport nor storage). A circle that must stay for a while is allowed by name in KNOWN_CYCLES (empty: none
 * is), and an allowed one that no longer exists fails too (the list only shrinks). No processes: the files are read.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** Circles allowed for now, each as its project and its files, sorted. Remove an entry once it is broken. */
const KNOWN_CYCLES = new Set<string>([]);

/** Inside raft, a file under `from` must import nothing under any of `never` (paths from the package root). */
const RAFT_LAYERS: Array<{ from: string; never: string[] }> = [
  { from: 'src/codec/', never: ['src/transport/', 'src/storage/', 'src/groups/'] },
  { from: 'src/storage/', never: ['src/groups/'] },
  { from: 'src/transport/', never: ['src/groups/'] },
];

const SKIP = new Set(['node_modules', 'dist', 'test', 'static']);

type Graph = Map<string, string[]>;

/** The TypeScript projects: directories holding a tsconfig.json, outside node_modules and build output. */
function projects(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('.') || SKIP.has(entry)) continue;
    const path = join(dir, entry);
    if (!statSync(path).isDirectory()) continue;
    if (existsSync(join(path, 'tsconfig.json'))) out.push(path);
    projects(path, out);
  }
  return out;
}

/** A project's source files, not descending into a nested project (a package's web/ is its own). */
function sources(dir: string, top: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (SKIP.has(entry)) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) {
      if (!existsSync(join(path, 'tsconfig.json')) || path === top) sources(path, top, out);
    } else if (/\.tsx?$/.test(entry) && !entry.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** Relative module specifiers of a source: `from '…'` (import and export), `import '…'` and `import('…')`. */
function relativeImports(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) out.push(m[1]!);
  return out;
}

/** The file a relative specifier names: `./x.js` is `./x.ts` (or .tsx) in the sources, a directory its index. */
function resolve(from: string, spec: string, files: ReadonlySet<string>): string | null {
  const base = normalize(join(dirname(from), spec)).replace(/\.js$/, '');
  for (const candidate of [`${base}.ts`, `${base}.tsx`, join(base, 'index.ts')])
    if (files.has(candidate)) return candidate;
  return null;
}

function graphOf(project: string): Graph {
  const files = sources(project, project);
  const known = new Set(files);
  const graph: Graph = new Map();
  for (const file of files) {
    const targets = relativeImports(readFileSync(file, 'utf8'))
      .map((spec) => resolve(file, spec, known))
      .filter((x): x is string => x !== null);
    graph.set(
      relative(project, file),
      [...new Set(targets)].map((x) => relative(project, x)),
    );
  }
  return graph;
}

/** The graph's circles: its strongly connected components of more than one file, or a file importing itself (Tarjan). */
function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

t.test('the circle finder finds circles', async (t) => {
  const g: Graph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts', 'd.ts']],
    ['d.ts', []],
    ['e.ts', ['e.ts']],
  ]);
  t.same(cycles(g), [['a.ts', 'b.ts', 'c.ts'], ['e.ts']]);
  t.same(
    cycles(
      new Map([
        ['a.ts', ['b.ts']],
        ['b.ts', []],
      ]),
    ),
    [],
  );
  t.same(
    relativeImports(
      "import type { A } from './a.js';\nexport * from \"../b.js\";\nimport './c.js';\nconst d = await import('./d.js');\nimport x from 'undici';",
    ),
    ['./a.js', '../b.js', './c.js', './d.js'],
  );
});

const all = projects(root).map((dir) => ({ name: relative(root, dir), graph: graphOf(dir) }));

t.test('no import circle inside any project, except the known ones', async (t) => {
  t.ok(all.length >= 20, `the projects are found (${all.length})`);
  t.ok((all.find((p) => p.name === 'packages/lib/raft')?.graph.size ?? 0) > 30, "raft's sources are read");
  const found = all.flatMap((p) => cycles(p.graph).map((c) => `${p.name}: ${c.join(', ')}`));
  t.same(
    found.filter((c) => !KNOWN_CYCLES.has(c)),
    [],
    'no new circle (break it: move what both sides need into a lower module)',
  );
  t.same(
    [...KNOWN_CYCLES].filter((c) => !found.includes(c)),
    [],
    'every allowed circle still exists (a broken one leaves KNOWN_CYCLES)',
  );
});

t.test("raft's lower layers import no upper one", async (t) => {
  const raft = all.find((p) => p.name === 'packages/lib/raft');
  t.ok(raft, 'raft is read');
  const arrows: string[] = [];
  for (const [file, targets] of raft?.graph ?? []) {
    for (const rule of RAFT_LAYERS) {
      if (!file.startsWith(rule.from)) continue;
      for (const target of targets)
        if (rule.never.some((up) => target.startsWith(up))) arrows.push(`${file} imports ${target}`);
    }
  }
  t.ok(
    [...(raft?.graph.keys() ?? [])].some((f) => f.startsWith('src/transport/')),
    'the transport is read',
  );
  t.same(arrows, [], 'no arrow back up');
});
