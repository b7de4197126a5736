/**
 * `node packages/services/shortlink/bin/replay.js --data DIR [--id analyticsN] [--wait]`: asks a running cluster's
 * analytics workers (every one, or the one named) to rebuild the aggregates of their partitions from offset 0 of
 * the click log (POST /internal/replay with the cluster token from DIR/token); with --wait, returns once each of
 * their partitions has counted up to the end of its partition the worker last saw (its /healthz `end`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';

interface WorkerEntry {
  id: string;
  role: string;
  httpAddress: string;
}

async function getJson(
  url: string,
  token: string,
  method: 'GET' | 'POST' = 'GET',
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(url, {
    method,
    headers: { authorization: `Bearer ${token}` },
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { data: { type: 'string' }, id: { type: 'string' }, wait: { type: 'boolean', default: false } },
  });
  if (values.data === undefined) {
    process.stderr.write('usage: replay.js --data DIR [--id analyticsN] [--wait]\n');
    return 2;
  }
  const token = readFileSync(join(values.data, 'token'), 'utf8').trim();
  const state = JSON.parse(readFileSync(join(values.data, 'cluster.json'), 'utf8')) as { workers?: WorkerEntry[] };
  const workers = state.workers ?? [];
  const byIndex = (role: string) =>
    workers
      .filter((w) => w.role === role)
      .sort((a, b) => Number(a.id.slice(role.length)) - Number(b.id.slice(role.length)));
  const analytics = byIndex('analytics').filter((w) => values.id === undefined || w.id === values.id);
  if (analytics.length === 0) {
    process.stderr.write(`replay: no analytics worker ${values.id ?? ''} in ${values.data}/cluster.json\n`);
    return 1;
  }
  for (const worker of analytics) {
    const started = await getJson(`http://${worker.httpAddress}/internal/replay`, token, 'POST');
    if (started.status !== 200) {
      process.stderr.write(`replay: ${worker.id} answered ${started.status} ${JSON.stringify(started.body)}\n`);
      return 1;
    }
    process.stdout.write(
      `replay started on ${worker.id}: aggregates of partitions ${JSON.stringify(started.body.partitions)} wiped, consuming from offset 0\n`,
    );
  }
  if (!values.wait) return 0;
  for (;;) {
    const healths = await Promise.all(
      analytics.map(async (a) => (await getJson(`http://${a.httpAddress}/healthz`, token)).body),
    );
    let consumed = 0;
    const done = healths.every((h) =>
      Object.values((h.partitions ?? {}) as Record<string, { offset: number; end: number | null }>).every(
        ({ offset, end }) => {
          consumed += offset;
          return end !== null && offset === end;
        },
      ),
    );
    if (done) {
      process.stdout.write(`replay done: ${consumed} records consumed\n`);
      return 0;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
