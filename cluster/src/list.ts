/**
 * `cluster list`: every cluster under a data root, one row each: its service, how many of its processes run, the
 * HTTP address a user calls first and the file holding its token. Read from the folders alone (pids, no HTTP call),
 * so it is as cheap as the CLI's start; `make up` ends with it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, isAbsolute, relative } from 'node:path';
import { entryRole } from './service-list.js';
import { clusterDirs, isAlive, readState, tokenPath, type ClusterState } from './state.js';

interface ListedCluster {
  /** The folder's name: what `--service` names when it is the service's (data/<service>). */
  cluster: string;
  service: string;
  dataDir: string;
  /** Processes (members not removed, and workers) running, of how many. */
  running: number;
  processes: number;
  /** The process users call first: the service's entry worker (the first running one), else a running member. */
  entry: { id: string; url: string };
  tokenFile: string;
}

export function listClusters(root: string): ListedCluster[] {
  return clusterDirs(root).map((dir) => listed(dir, readState(dir)));
}

function listed(dir: string, state: ClusterState): ListedCluster {
  const members = state.members.filter((m) => !m.removed);
  const workers = state.workers ?? [];
  const role = entryRole(state.service);
  const candidates = role === undefined ? members : workers.filter((w) => w.role === role);
  const pick = candidates.find((p) => isAlive(p.pid)) ?? candidates[0] ?? members[0];
  return {
    cluster: basename(dir),
    service: state.service,
    dataDir: dir,
    running: [...members, ...workers].filter((p) => isAlive(p.pid)).length,
    processes: members.length + workers.length,
    entry: pick === undefined ? { id: '-', url: '-' } : { id: pick.id, url: `http://${pick.httpAddress}` },
    tokenFile: tokenPath(dir),
  };
}

/** A path as the user would type it from here: relative when under the working directory. */
export function shownPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.length > 0 && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

/**
 * Clusters that share one token, as groups of two or more: a key derived from one of them (a client token, a
 * tenant key, a user key) is then valid on the others. `make up` gives each its own unless CLUSTER_AUTH_TOKEN says
 * otherwise; data made by an older `make up` (one token for all) still shares it.
 */
export function sharedTokens(clusters: ListedCluster[]): string[][] {
  const byToken = new Map<string, string[]>();
  for (const c of clusters) {
    if (!existsSync(c.tokenFile)) continue;
    const token = readFileSync(c.tokenFile, 'utf8').trim();
    byToken.set(token, [...(byToken.get(token) ?? []), c.cluster]);
  }
  return [...byToken.values()].filter((names) => names.length > 1);
}
