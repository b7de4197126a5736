// Bundles each browser page given (a folder with src/main.ts and static/index.html) into its dist/ (app.js, its
// CSS when it imports any, index.html): run by `make build` after `tsc -b`, so `make up` and `make test` serve the
// editor's and the player's pages on a fresh machine. The output is git-ignored.
//   node scripts/build-web.mjs packages/services/collab/web packages/services/video/web
import { build } from 'esbuild';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

const folders = process.argv.slice(2);
if (folders.length === 0) {
  console.error('usage: node scripts/build-web.mjs FOLDER...');
  process.exit(2);
}
for (const folder of folders) {
  const here = resolve(folder);
  const dist = join(here, 'dist');
  await mkdir(dist, { recursive: true });
  // A page whose index.html loads its bundle from /assets/ (the cluster dashboard's) gets it in dist/assets/.
  const html = await readFile(join(here, 'static/index.html'), 'utf8');
  const outdir = html.includes('src="/assets/') ? join(dist, 'assets') : dist;
  await build({
    entryPoints: { app: join(here, 'src/main.ts') },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    outdir,
    minify: true,
    sourcemap: true,
    logLevel: 'warning',
  });
  await copyFile(join(here, 'static/index.html'), join(dist, 'index.html'));
}
