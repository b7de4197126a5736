/**
 * jepsen-like runs for the dashboard: each sub-folder of the jepsen dir that holds a report.html, with the verdict
 * and what ran from its result.json (written by jepsen-like's runner), and the run's files served as they are.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, resolve, sep } from 'node:path';
import { badRequest, notFound } from '@raftkit/http';
import type { JepsenRun } from './types.js';

const MAX_RUNS = 500;

export function listRuns(dir: string): JepsenRun[] {
  if (!existsSync(dir)) return [];
  const runs: JepsenRun[] = [];
  for (const name of readdirSync(dir)) {
    const report = join(dir, name, 'report.html');
    if (!existsSync(report)) continue;
    const run: JepsenRun = {
      name,
      workload: null,
      nemesis: null,
      valid: null,
      finishedAt: null,
      reportUrl: `/jepsen/${encodeURIComponent(name)}/report.html`,
    };
    try {
      const resultPath = join(dir, name, 'result.json');
      const result = JSON.parse(readFileSync(resultPath, 'utf8')) as {
        valid?: unknown;
        run?: { workload?: unknown; nemesis?: unknown };
      };
      run.valid = typeof result.valid === 'boolean' ? result.valid : null;
      if (typeof result.run?.workload === 'string') run.workload = result.run.workload;
      const nemesis = result.run?.nemesis;
      if (Array.isArray(nemesis)) run.nemesis = nemesis.filter((n) => typeof n === 'string').join(',');
      else if (typeof nemesis === 'string') run.nemesis = nemesis;
      run.finishedAt = Math.round(statSync(resultPath).mtimeMs);
    } catch {
      run.finishedAt = Math.round(statSync(report).mtimeMs);
    }
    runs.push(run);
  }
  return runs.sort((a, b) => (b.finishedAt ?? 0) - (a.finishedAt ?? 0)).slice(0, MAX_RUNS);
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json',
  '.jsonl': 'application/x-ndjson',
  '.log': 'text/plain; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

export function contentType(path: string): string {
  return TYPES[extname(path)] ?? 'application/octet-stream';
}

/**
 * The file a /jepsen/RUN/FILE path means, inside the jepsen dir: 400 for any ".." or "." segment, a hidden name
 * or a path that escapes the folder; 404 when missing.
 */
export function jepsenFile(dir: string, segments: string[]): string {
  if (
    segments.length < 2 ||
    segments.some(
      (s) =>
        s === '' ||
        s === '.' ||
        s === '..' ||
        s.startsWith('.') ||
        s.includes('/') ||
        s.includes('\\') ||
        s.includes('\0'),
    )
  ) {
    throw badRequest('invalid_path', 'the path must name a file inside one run folder (no "..", no hidden names)');
  }
  const root = resolve(dir);
  const path = resolve(root, ...segments);
  if (!path.startsWith(root + sep)) throw badRequest('invalid_path', 'the path leaves the jepsen folder');
  if (!existsSync(path) || !statSync(path).isFile())
    throw notFound(`no file ${segments.join('/')} among the jepsen runs`);
  return path;
}
