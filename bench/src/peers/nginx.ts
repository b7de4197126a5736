/**
 * The nginx ceiling of the shortlink benchmark: Debian's `nginx` answering every request with a fixed
 * `return 302 <url>;`, installed with apt-get when /usr/sbin/nginx is missing. A generated configuration in a
 * temporary directory: one listener on 127.0.0.1:<free port>, worker_processes = our app server count, access
 * log off, keep-alive without a per-connection request cap (node:http has none), pid, logs and temp paths in the
 * directory; run in the foreground (`-g 'daemon off;'`) and stopped by pid.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup, removeLater } from '../cleanup.js';
import { BenchError, freePortBlock, runCommand, sleep } from '../procs.js';
import { ensureDebianPackage, spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

const NGINX_BINARY = '/usr/sbin/nginx';

export interface Nginx {
  version: string;
  origin: string;
  /** Master and workers: the processes whose CPU time counts. */
  pids: number[];
  stop(): Promise<void>;
}

async function nginxVersion(): Promise<string> {
  const r = await runCommand(NGINX_BINARY, ['-v'], { timeoutMs: 10_000 });
  return /nginx\/(\S+)/.exec(r.output)?.[1] ?? 'unknown';
}

/**
 * The configuration file: `location` is the Location of every answer (a fixed 302), or `root` a folder served as
 * static files (the video delivery benchmark's segments); `headers` extra response headers.
 */
export function nginxConfig(o: {
  dir: string;
  port: number;
  workers: number;
  location?: string;
  root?: string;
  headers: Record<string, string>;
}): string {
  const extra = Object.entries(o.headers).map(([k, v]) => `      add_header ${k} ${quote(v)} always;`);
  return [
    `worker_processes ${o.workers};`,
    `pid ${o.dir}/nginx.pid;`,
    `error_log ${o.dir}/error.log warn;`,
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    '  server_tokens off;',
    '  keepalive_timeout 30s;',
    '  keepalive_requests 100000000;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${o.dir}/tmp/${t};`),
    '  server {',
    `    listen 127.0.0.1:${o.port};`,
    '    location / {',
    ...extra,
    o.root !== undefined ? `      root ${quote(o.root)};` : `      return 302 ${quote(o.location ?? '/')};`,
    '    }',
    '  }',
    '}',
    '',
  ].join('\n');
}

/** A configuration string literal; nginx cannot escape `$` in one, so values with `$`, quotes or backslashes are refused. */
function quote(value: string): string {
  if (/["\\$]/.test(value)) throw new BenchError(`cannot put ${JSON.stringify(value)} in an nginx configuration`);
  return `"${value}"`;
}

/** Children of `parent` (from /proc), e.g. nginx's worker processes. */
function childPids(parent: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export async function startNginx(o: {
  workers: number;
  location?: string;
  root?: string;
  headers: Record<string, string>;
}): Promise<Nginx> {
  await ensureDebianPackage(NGINX_BINARY, 'nginx');
  const version = await nginxVersion();
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-nginx-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop nginx', async () => {
    process.stderr.write('bench: stopping nginx\n');
    await stopDaemons(daemons);
    await removeDir();
  });
  try {
    mkdirSync(join(dir, 'tmp'));
    const port = (await freePortBlock([1])) + 1;
    const config = join(dir, 'nginx.conf');
    writeFileSync(
      config,
      nginxConfig({
        dir,
        port,
        workers: o.workers,
        headers: o.headers,
        ...(o.location !== undefined ? { location: o.location } : {}),
        ...(o.root !== undefined ? { root: o.root } : {}),
      }),
    );
    process.stderr.write(
      `bench: starting nginx ${version} (${o.workers} worker processes) on 127.0.0.1:${port}, config ${config}\n`,
    );
    const daemon = spawnDaemon(
      'nginx',
      NGINX_BINARY,
      ['-p', dir, '-e', join(dir, 'error.log'), '-c', config, '-g', 'daemon off;'],
      { log: join(dir, 'stderr.log') },
    );
    daemons.push(daemon);
    await waitListening(daemon, port);
    // The master listens first and forks its workers after; their CPU counts too, so wait for all of them.
    const deadline = Date.now() + 10_000;
    while (childPids(daemon.pid).length < o.workers) {
      if (Date.now() > deadline)
        throw new BenchError(`nginx did not start its ${o.workers} workers; see ${join(dir, 'error.log')}`);
      await sleep(20);
    }
    return { version, origin: `http://127.0.0.1:${port}`, pids: [daemon.pid, ...childPids(daemon.pid)], stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
