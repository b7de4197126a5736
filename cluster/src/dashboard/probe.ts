/**
 * What the collector asks of each process: one HTTP GET with a short deadline (a paused member must not hold up
 * a poll), and the CPU time, memory and run state the kernel keeps in /proc. Every call is counted, so a test
 * (through GET /api/debug) can tell that more tabs do not mean more polling.
 */
import { Agent } from 'node:http';
import { readFileSync } from 'node:fs';
import { loopbackExchange, type LoopbackAnswer } from '../loopback-http.js';

/** Kept-alive connections: a fresh TCP connection per poll per process would be most of the poll's cost. */
const agent = new Agent({ keepAlive: true, maxSockets: 4, maxFreeSockets: 2 });

export const probeCounters = { httpCalls: 0, httpFailures: 0 };

type Fetched = LoopbackAnswer;

/** GET http://address/path with a bearer token; null when it fails or takes longer than timeoutMs. */
export async function httpGet(
  address: string,
  path: string,
  token: string,
  timeoutMs: number,
): Promise<Fetched | null> {
  probeCounters.httpCalls++;
  const answer = await loopbackExchange({ address, method: 'GET', path, token, timeoutMs, agent });
  if (answer === null) probeCounters.httpFailures++;
  return answer;
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

interface ProcSample {
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
