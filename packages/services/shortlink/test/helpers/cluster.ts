/** Real short-link clusters for integration tests, through @raftkit/testkit: members and workers, always torn down. */
import { startCluster, type ClusterOptions, type TestCluster } from '@raftkit/testkit';

export { call, until, agent, type Answer } from '@raftkit/testkit';

export interface ShortlinkCluster extends TestCluster {
  /** The app servers' base URLs, app1 first. */
  apps: string[];
}

/** `env` reaches every process, restarted ones included (e.g. SHORTLINK_PURGE_GRACE_MS for the members). */
export async function startShortlink(
  options: Omit<ClusterOptions, 'nodes' | 'tickMs'> = {},
): Promise<ShortlinkCluster> {
  const cluster = await startCluster('shortlink', options);
  return { ...cluster, apps: cluster.role('app').map((w) => w.url) };
}
