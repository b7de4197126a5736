// Bundles the player page into dist/ (app.js and index.html): run by `make build` after `tsc -b`, so the edges
// and the app tier serve a page on a fresh machine. The output is git-ignored.
import { build } from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
await mkdir(dist, { recursive: true });
await build({
  entryPoints: { app: join(here, 'src/main.ts') },
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  outdir: dist,
  minify: true,
  sourcemap: true,
  logLevel: 'warning',
});
await copyFile(join(here, 'static/index.html'), join(dist, 'index.html'));
