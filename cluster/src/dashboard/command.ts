/** `cluster dashboard`: pick the page's secret, start the server, print its address, serve until SIGTERM or SIGINT. */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError, clusterDirs, tokenPath } from '../state.js';
import { RemoteCluster } from '../remote.js';
import { startDashboard } from './server.js';

interface DashboardCommandOptions {
  dataRoot: string;
  host: string;
  port: number;
  authToken?: string | undefined;
  authTokenFile?: string | undefined;
  jepsenDir: string;
  /** Remote mode: the members' URLs (https with --ca), shown as one cluster named `name`. */
  endpoints?: string | undefined;
  ca?: string | undefined;
  name?: string | undefined;
}

/** Where the dashboard keeps its own login secret when none is given: beside the clusters, never one of theirs. */
export function dashboardTokenPath(dataRoot: string): string {
  return join(dataRoot, 'dashboard.token');
}

/**
 * The page's login secret, its own and never a cluster's (a cluster token would let whoever logs in call that
 * cluster, and the page would then admit anyone holding it): --auth-token (kept for those who pass it, though argv
 * shows in `ps`), else the first line of --auth-token-file, else $DASHBOARD_AUTH_TOKEN, else DATA_ROOT/dashboard.token,
 * made (mode 600) when missing.
 */
export function dashboardToken(
  dataRoot: string,
  o: { authToken?: string | undefined; authTokenFile?: string | undefined } = {},
): string {
  if (o.authToken !== undefined && o.authTokenFile !== undefined)
    throw new CliError('give --auth-token or --auth-token-file, not both');
  if (o.authToken !== undefined) {
    if (o.authToken.length === 0) throw new CliError('--auth-token is empty');
    return o.authToken;
  }
  if (o.authTokenFile !== undefined) return readSecret(o.authTokenFile, '--auth-token-file');
  const env = process.env.DASHBOARD_AUTH_TOKEN;
  if (env !== undefined && env.length > 0) return env;
  return ownSecret(dataRoot);
}

function readSecret(path: string, what: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new CliError(`${what}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const secret = text.split('\n')[0]!.trim();
  if (secret.length === 0) throw new CliError(`${what}: ${path} is empty`);
  if ((statSync(path).mode & 0o077) !== 0)
    process.stderr.write(`warning: ${path} can be read by other users (chmod 600 ${path})\n`);
  return secret;
}

/**
 * DATA_ROOT/dashboard.token, made when missing. One left by an older `make up`, which gave the dashboard the token
 * every cluster shared, is replaced: the page must not take a cluster's token.
 */
function ownSecret(dataRoot: string): string {
  const path = dashboardTokenPath(dataRoot);
  if (existsSync(path)) {
    const secret = readSecret(path, 'the dashboard token');
    if (!clusterTokens(dataRoot).has(secret)) return secret;
    process.stderr.write(
      `dashboard: ${path} held a cluster's token; it now holds a new secret of the dashboard's own\n`,
    );
    rmSync(path, { force: true });
  }
  mkdirSync(dataRoot, { recursive: true });
  const secret = randomBytes(24).toString('base64url');
  try {
    writeFileSync(path, secret + '\n', { mode: 0o600, flag: 'wx' });
  } catch (e) {
    // Another dashboard (or `make up`) made it meanwhile: take theirs.
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return readSecret(path, 'the dashboard token');
    throw new CliError(`cannot write ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  return secret;
}

/** The tokens of the clusters under the data root (their token files). */
function clusterTokens(dataRoot: string): Set<string> {
  const tokens = new Set<string>();
  for (const dir of clusterDirs(dataRoot)) {
    try {
      tokens.add(readFileSync(tokenPath(dir), 'utf8').trim());
    } catch {
      // a cluster without its token file has no token to compare
    }
  }
  return tokens;
}

export async function runDashboardCommand(o: DashboardCommandOptions): Promise<void> {
  let remote;
  let token: string;
  if (o.authToken !== undefined)
    process.stderr.write(
      'note: --auth-token shows in ps to every user of this machine; --auth-token-file FILE or $DASHBOARD_AUTH_TOKEN keep the secret out of sight\n',
    );
  if (o.endpoints !== undefined) {
    // The remote members' token: $CLUSTER_AUTH_TOKEN, else --auth-token (which then is the page's secret too, as
    // it always was for a remote cluster).
    const membersToken = process.env.CLUSTER_AUTH_TOKEN || o.authToken || '';
    if (membersToken.length === 0)
      throw new CliError('--endpoints needs the cluster token: set CLUSTER_AUTH_TOKEN (or pass --auth-token)');
    token = dashboardToken(o.dataRoot, o);
    const name = o.name ?? 'remote';
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name))
      throw new CliError(`--name: letters, digits, '.', '_' or '-', at most 64; got ${JSON.stringify(name)}`);
    remote = {
      name,
      cluster: RemoteCluster.open({
        endpoints: o.endpoints,
        token: membersToken,
        ...(o.ca !== undefined ? { ca: o.ca } : {}),
      })!,
    };
  } else {
    if (o.ca !== undefined || o.name !== undefined) throw new CliError('--ca and --name go with --endpoints');
    token = dashboardToken(o.dataRoot, o);
  }
  let dashboard;
  try {
    dashboard = await startDashboard({
      dataRoot: o.dataRoot,
      jepsenDir: o.jepsenDir,
      token,
      host: o.host,
      port: o.port,
      ...(remote !== undefined ? { remote } : {}),
    });
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
