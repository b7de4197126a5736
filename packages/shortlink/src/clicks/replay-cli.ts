/**
 * `node packages/shortlink/bin/replay.js --data DIR [--id analytics1] [--wait]`: asks a running cluster's
 * analytics worker to rebuild its aggregates from stream offset 0 (POST /internal/replay with the cluster token
 * from DIR/token); with --wait, returns once it has caught up with the stream again.
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

async function getJson(url: string, token: string, method: 'GET' | 'POST' = 'GET'): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(url, { method, headers: { authorization: `Bearer ${token}` }, headersTimeout: 30_000, bodyTimeout: 30_000 });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { data: { type: 'string' }, id: { type: 'string', default: 'analytics1' }, wait: { type: 'boolean', default: false } } });
  if (values.data === undefined) {
    process.stderr.write('usage: replay.js --data DIR [--id analytics1] [--wait]\n');
    return 2;
  }
  const token = readFileSync(join(values.data, 'token'), 'utf8').trim();
  const state = JSON.parse(readFileSync(join(values.data, 'cluster.json'), 'utf8')) as { workers?: WorkerEntry[] };
  const workers = state.workers ?? [];
  const analytics = workers.find((w) => w.id === values.id && w.role === 'analytics');
  const stream = workers.find((w) => w.role === 'stream');
  if (analytics === undefined || stream === undefined) {
    process.stderr.write(`replay: no analytics worker ${values.id} and stream worker in ${values.data}/cluster.json\n`);
    return 1;
  }
  const started = await getJson(`http://${analytics.httpAddress}/internal/replay`, token, 'POST');
  if (started.status !== 200) {
    process.stderr.write(`replay: ${analytics.id} answered ${started.status} ${JSON.stringify(started.body)}\n`);
    return 1;
  }
  process.stdout.write(`replay started on ${analytics.id}: aggregates wiped, consuming from offset 0\n`);
  if (!values.wait) return 0;
  for (;;) {
    const [s, a] = await Promise.all([getJson(`http://${stream.httpAddress}/healthz`, token), getJson(`http://${analytics.httpAddress}/healthz`, token)]);
    if (a.body.offset === s.body.end) {
      process.stdout.write(`replay done: ${String(a.body.offset)} records consumed\n`);
      return 0;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
