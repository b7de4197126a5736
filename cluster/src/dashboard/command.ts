/** `cluster dashboard`: pick the token, start the server, print its address, serve until SIGTERM or SIGINT. */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError, statePath, tokenPath } from '../state.js';
import { RemoteCluster } from '../remote.js';
import { startDashboard } from './server.js';

export interface DashboardCommandOptions {
  dataRoot: string;
  host: string;
  port: number;
  authToken?: string | undefined;
  jepsenDir: string;
  /** Remote mode: the members' URLs (https with --ca), shown as one cluster named `name`. */
  endpoints?: string | undefined;
  ca?: string | undefined;
  name?: string | undefined;
}

/** --auth-token, else $CLUSTER_AUTH_TOKEN, else the token every cluster under the data root shares. */
export function dashboardToken(dataRoot: string, option: string | undefined): string {
  if (option !== undefined && option.length > 0) return option;
  const env = process.env.CLUSTER_AUTH_TOKEN;
  if (env !== undefined && env.length > 0) return env;
  const tokens = new Set<string>();
  const dirs = existsSync(dataRoot) ? readdirSync(dataRoot).map((d) => join(dataRoot, d)).filter((d) => existsSync(statePath(d))) : [];
  for (const dir of dirs) {
    try {
      tokens.add(readFileSync(tokenPath(dir), 'utf8').trim());
    } catch {
      // a cluster without its token file says nothing about the token
    }
  }
  if (tokens.size === 1) return [...tokens][0]!;
  if (tokens.size === 0) throw new CliError(`no cluster token under ${dataRoot}: pass --auth-token (or set CLUSTER_AUTH_TOKEN)`);
  throw new CliError(`the clusters under ${dataRoot} have different tokens: pass --auth-token (or set CLUSTER_AUTH_TOKEN)`);
}

export async function runDashboardCommand(o: DashboardCommandOptions): Promise<void> {
  let remote;
  let token: string;
  if (o.endpoints !== undefined) {
    // The remote members' token is the page's too: one secret for the cluster, as with a local one.
    token = o.authToken ?? process.env.CLUSTER_AUTH_TOKEN ?? '';
    if (token.length === 0) throw new CliError('--endpoints needs the cluster token: pass --auth-token or set CLUSTER_AUTH_TOKEN');
    const name = o.name ?? 'remote';
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw new CliError(`--name: letters, digits, '.', '_' or '-', at most 64; got ${JSON.stringify(name)}`);
    remote = { name, cluster: RemoteCluster.open({ endpoints: o.endpoints, token, ...(o.ca !== undefined ? { ca: o.ca } : {}) })! };
  } else {
    if (o.ca !== undefined || o.name !== undefined) throw new CliError('--ca and --name go with --endpoints');
    token = dashboardToken(o.dataRoot, o.authToken);
  }
  let dashboard;
  try {
    dashboard = await startDashboard({ dataRoot: o.dataRoot, jepsenDir: o.jepsenDir, token, host: o.host, port: o.port, ...(remote !== undefined ? { remote } : {}) });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE') throw new CliError(`port in use: ${o.host}:${o.port} (choose another --port)`);
    if (err.code !== undefined) throw new CliError(`cannot listen on ${o.host}:${o.port}: ${err.message}`);
    throw e;
  }
  console.log(`dashboard: ${dashboard.url}#token=${encodeURIComponent(token)}`);
  await new Promise<void>((done) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void dashboard.close().then(done);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
