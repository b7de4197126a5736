/**
 * What the collector asks of each process: one HTTP GET with a short deadline (a paused member must not hold up
 * a poll), and the CPU time, memory and run state the kernel keeps in /proc. Every call is counted, so a test
 * (through GET /api/debug) can tell that more tabs do not mean more polling.
 */
import { Agent, request } from 'node:http';
import { readFileSync } from 'node:fs';

/** Kept-alive connections: a fresh TCP connection per poll per process would be most of the poll's cost. */
const agent = new Agent({ keepAlive: true, maxSockets: 4, maxFreeSockets: 2 });

export const probeCounters = { httpCalls: 0, httpFailures: 0 };

export interface Fetched {
  status: number;
  text: string;
}

/** GET http://address/path with a bearer token; null when it fails or takes longer than timeoutMs. */
export function httpGet(address: string, path: string, token: string, timeoutMs: number): Promise<Fetched | null> {
  probeCounters.httpCalls++;
  return new Promise((resolve) => {
    const colon = address.lastIndexOf(':');
    let done = false;
    const finish = (value: Fetched | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (value === null) probeCounters.httpFailures++;
      resolve(value);
    };
    const req = request(
      { host: address.slice(0, colon), port: Number(address.slice(colon + 1)), path, method: 'GET', agent, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          // A process's metrics are a few kB; anything far bigger is not what we asked for.
          if (size > 4_000_000) req.destroy();
          else chunks.push(c);
        });
        res.on('end', () => finish({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', () => finish(null));
      },
    );
    // The whole call, not just idle time: a stopped process accepts the connection (the kernel does) and never answers.
    const timer = setTimeout(() => {
      req.destroy();
      finish(null);
    }, timeoutMs);
    req.on('error', () => finish(null));
    req.end();
  });
}

export async function getJson(address: string, path: string, token: string, timeoutMs: number): Promise<unknown> {
  const answer = await httpGet(address, path, token, timeoutMs);
  if (answer === null || answer.status !== 200) return null;
  try {
    return JSON.parse(answer.text) as unknown;
  } catch {
    return null;
  }
}

export interface ProcSample {
  /** utime + stime, in clock ticks. */
  cpuTicks: number;
  rssBytes: number | null;
  /** Stopped by SIGSTOP (state T). */
  stopped: boolean;
}

/** Clock ticks per second: 100 on every Linux this runs on (sysconf(_SC_CLK_TCK) is not reachable from Node). */
export const CLOCK_TICKS = 100;

/** The kernel's view of a process, or null when it is gone (or there is no /proc). */
export function procSample(pid: number): ProcSample | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ...": comm may hold spaces, so count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0]!;
    if (state === 'Z' || state === 'X') return null;
    const cpuTicks = Number(fields[11]) + Number(fields[12]);
    let rssBytes: number | null = null;
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    if (m !== null) rssBytes = Number(m[1]) * 1024;
    return { cpuTicks, rssBytes, stopped: state === 'T' || state === 't' };
  } catch {
    return null;
  }
}
