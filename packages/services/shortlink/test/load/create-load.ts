/**
 * Create throughput on a real cluster (5 members, click workers, 3 app servers through the `cluster` CLI), with
 * the CPU each process spent per 1,000 creates (steadier than wall time on a shared machine) and the app
 * servers' batch sizes. `node packages/services/shortlink/dist/test/load/create-load.js [creates] [clients per app]`.
 */
import { call, startShortlink } from '../helpers/cluster.js';
import { apiKeys, clusterCpuSeconds, createMany } from '../helpers/creates.js';

const creates = Number(process.argv[2] ?? 20_000);
const clientsPerApp = Number(process.argv[3] ?? 32);
const unlimited = {
  create_burst_per_key: '1000000',
  create_rate_per_key: '1000000',
  create_burst_per_ip: '1000000',
  create_rate_per_ip: '1000000',
};

// Everything is printed after the cluster is down, so a closed stdout (`| head`) cannot leave it running.
const report: string[] = [];
const cluster = await startShortlink({ workers: 'app=3', settings: unlimited });
try {
  const keys = await apiKeys(cluster, 24);
  const cpuBefore = clusterCpuSeconds(cluster);
  const ownCpuBefore = process.cpuUsage();
  const run = await createMany(cluster.apps, keys, creates, clientsPerApp);
  const cpuAfter = clusterCpuSeconds(cluster);
  const ownCpu = process.cpuUsage(ownCpuBefore);
  const per1000 = (seconds: number) => ((seconds * 1000) / creates).toFixed(3);
  let total = 0;
  const rows: string[] = [];
  for (const [id, after] of cpuAfter) {
    const used = after - (cpuBefore.get(id) ?? 0);
    total += used;
    rows.push(`${id}=${per1000(used)}`);
  }
  const client = (ownCpu.user + ownCpu.system) / 1e6;
  report.push(
    `${creates} creates in ${run.seconds.toFixed(1)} s (${Math.round(creates / run.seconds)}/s), ${clientsPerApp * cluster.apps.length} clients, ${run.failures.length} failures`,
  );
  report.push(`cluster CPU s per 1,000 creates: ${per1000(total)} (${rows.join(' ')}); load client ${per1000(client)}`);
  for (const app of cluster.apps) {
    const metrics = (await call(app, 'GET', '/metrics')).body.text as string;
    const sum = /shortlink_create_batch_size_sum (\S+)/.exec(metrics)?.[1];
    const count = /shortlink_create_batch_size_count (\S+)/.exec(metrics)?.[1];
    report.push(
      `${app}: ${count ?? 'no'} batches, ${sum !== undefined && count !== undefined ? (Number(sum) / Number(count)).toFixed(1) : '-'} links per batch`,
    );
  }
  if (run.failures.length > 0) report.push(...run.failures.slice(0, 5));
} finally {
  await cluster.down();
}
console.log(report.join('\n'));
