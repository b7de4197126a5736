/** Many concurrent creates through the app servers, and the CPU the cluster's processes spent on them. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, type ShortlinkCluster } from './cluster.js';

export interface CreateRun {
  /** code -> the item number whose URL it got (https://example.com/item/<n>). */
  codes: Map<string, number>;
  failures: string[];
  seconds: number;
}

/** API keys for `count` users (user0, user1...). */
export async function apiKeys(cluster: ShortlinkCluster, count: number): Promise<string[]> {
  return Promise.all(
    Array.from(
      { length: count },
      async (_, i) =>
        (await call(cluster.apps[0]!, 'POST', '/api/keys', { token: cluster.token, body: { user: `user${i}` } })).body
          .api_key as string,
    ),
  );
}

/** `total` creates of https://example.com/item/<n> from `clientsPerApp` sequential clients on each app server. */
export async function createMany(
  apps: string[],
  keys: string[],
  total: number,
  clientsPerApp: number,
): Promise<CreateRun> {
  const codes = new Map<string, number>();
  const failures: string[] = [];
  let next = 0;
  const started = Date.now();
  const client = async (app: string, k: number): Promise<void> => {
    for (let n = next++; n < total; n = next++) {
      const a = await call(app, 'POST', '/api/urls', {
        token: keys[k % keys.length]!,
        body: { long_url: `https://example.com/item/${n}` },
      });
      if (a.status !== 201) {
        failures.push(`item ${n}: ${a.status} ${JSON.stringify(a.body)}`);
        continue;
      }
      const code = a.body.short_code as string;
      if (codes.has(code)) failures.push(`duplicate code ${code} for items ${codes.get(code)} and ${n}`);
      codes.set(code, n);
    }
  };
  await Promise.all(
    apps.flatMap((app, i) => Array.from({ length: clientsPerApp }, (_, c) => client(app, i * clientsPerApp + c))),
  );
  return { codes, failures, seconds: (Date.now() - started) / 1000 };
}

/** CPU seconds (user + system) each member and worker process of the cluster has used so far, by id. */
export function clusterCpuSeconds(cluster: ShortlinkCluster): Map<string, number> {
  const state = JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
    members: Array<{ id: string; pid: number | null }>;
    workers?: Array<{ id: string; pid: number | null }>;
  };
  const cpu = new Map<string, number>();
  for (const p of [...state.members, ...(state.workers ?? [])]) {
    if (p.pid === null) continue;
    try {
      // Fields 14 and 15 of /proc/<pid>/stat (after the parenthesised name) are utime and stime in clock ticks.
      const fields = readFileSync(`/proc/${p.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      cpu.set(p.id, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // The process is gone: it used nothing more.
    }
  }
  return cpu;
}
