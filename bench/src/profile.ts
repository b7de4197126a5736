/** Reading V8 CPU profiles (.cpuprofile, as written by node --cpu-prof): where the samples fell, by function and by area. */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }[];
  startTime: number;
  endTime: number;
  /** The node of each sample, and the µs since the previous one (startTime for the first). */
  samples?: number[];
  timeDeltas?: number[];
}

/**
 * A stretch of a run as the profiles' own clock counts it: µs of CLOCK_MONOTONIC, the clock of V8's sample times
 * and of `process.hrtime` in every process of the machine, so a benchmark marks a phase with `monotonicUs()` and
 * the members' profiles are read for that phase alone.
 */
export interface ProfileWindow {
  fromUs: number;
  toUs: number;
}

export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** The profile with only the samples inside `window` counted (hitCount rebuilt from the samples). */
export function windowed(p: CpuProfile, window: ProfileWindow): CpuProfile {
  if (p.samples === undefined || p.timeDeltas === undefined) return p;
  const hits = new Map<number, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < window.fromUs || t > window.toUs) continue;
    const id = p.samples[i]!;
    hits.set(id, (hits.get(id) ?? 0) + 1);
  }
  return { ...p, nodes: p.nodes.map((n) => ({ ...n, hitCount: hits.get(n.id) ?? 0 })) };
}

interface Hotspot {
  name: string;
  samples: number;
  /** Share of the busy (non-idle) samples, in percent. */
  percent: number;
}

interface ProfileSummary {
  busySamples: number;
  idleSamples: number;
  functions: Hotspot[];
  areas: Hotspot[];
}

/** The area a frame belongs to: a package of ours, a dependency, a Node internal module, or V8 itself. */
export function areaOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : 'native';
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return pkg[1]!;
  const ours = /\/(packages\/[^/]+\/[^/]+|cluster|bench)\//.exec(url);
  if (ours) return ours[1]!;
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  return url;
}

function shortUrl(url: string): string {
  const m = /\/((?:packages\/[^/]+\/[^/]+|cluster|bench)\/.*|node_modules\/.*)$/.exec(url);
  return m ? m[1]!.replace(/^node_modules\//, '') : url;
}

/** Self samples by function and by area, over one or more profiles. */
export function summarize(profiles: CpuProfile[], top = 15): ProfileSummary {
  const byFunction = new Map<string, number>();
  const byArea = new Map<string, number>();
  let idle = 0;
  let busy = 0;
  for (const p of profiles) {
    for (const n of p.nodes) {
      const hits = n.hitCount ?? 0;
      if (hits === 0) continue;
      const { functionName, url, lineNumber } = n.callFrame;
      if (functionName === '(idle)') {
        idle += hits;
        continue;
      }
      busy += hits;
      const name =
        url === '' ? functionName || '(native)' : `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + hits);
      const area = areaOf(url, functionName);
      byArea.set(area, (byArea.get(area) ?? 0) + hits);
    }
  }
  const rank = (m: Map<string, number>): Hotspot[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, samples]) => ({
        name,
        samples,
        percent: busy === 0 ? 0 : Math.round((1000 * samples) / busy) / 10,
      }));
  return { busySamples: busy, idleSamples: idle, functions: rank(byFunction), areas: rank(byArea) };
}

export function formatSummary(s: ProfileSummary, title: string): string {
  const total = s.busySamples + s.idleSamples;
  const lines = [
    `${title}: ${s.busySamples} busy samples of ${total} (${total === 0 ? 0 : Math.round((100 * s.busySamples) / total)}% busy)`,
  ];
  lines.push('  self time by area:');
  for (const a of s.areas.slice(0, 10)) lines.push(`    ${a.percent.toFixed(1).padStart(5)}%  ${a.name}`);
  lines.push('  self time by function:');
  for (const f of s.functions) lines.push(`    ${f.percent.toFixed(1).padStart(5)}%  ${f.name}`);
  return lines.join('\n');
}

/**
 * Summarize the member-<pid>.cpuprofile files in `dir` (leader first if named), and write summary.txt there; with
 * `window`, only the samples taken inside it.
 */
export function summarizeProfiles(
  dir: string,
  pids: number[],
  leaderPid?: number,
  window?: ProfileWindow,
): string | null {
  if (!existsSync(dir)) return null;
  const files = readdirSync(dir).filter((f) => pids.some((pid) => f === `member-${pid}.cpuprofile`));
  if (files.length === 0) return null;
  const load = (f: string): CpuProfile => {
    const p = JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile;
    return window === undefined ? p : windowed(p, window);
  };
  const parts: string[] = [];
  if (leaderPid !== undefined && files.includes(`member-${leaderPid}.cpuprofile`)) {
    parts.push(formatSummary(summarize([load(`member-${leaderPid}.cpuprofile`)]), `leader (pid ${leaderPid})`));
    const followers = files.filter((f) => f !== `member-${leaderPid}.cpuprofile`);
    if (followers.length > 0)
      parts.push(formatSummary(summarize(followers.map(load)), `${followers.length} followers together`));
  } else {
    parts.push(formatSummary(summarize(files.map(load)), `${files.length} members together`));
  }
  const text = parts.join('\n\n');
  writeFileSync(join(dir, 'summary.txt'), text + '\n');
  return text;
}
