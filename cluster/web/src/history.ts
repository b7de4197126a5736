/**
 * The last five minutes of each cluster's per-member requests/s and p99, one sample per overview push, in the
 * column shape uPlot draws ([times, series...], gaps as null). A sample the collector missed (its rate is null)
 * or a member down is a gap, never a zero. Pure: no DOM, no clock of its own.
 */
import type { Overview } from './types.js';

export const WINDOW_MS = 5 * 60_000;

interface ClusterHistory {
  /** Sample times, seconds (uPlot's x unit). */
  times: number[];
  rps: Map<string, Array<number | null>>;
  p99: Map<string, Array<number | null>>;
}

export type Columns = [number[], ...Array<Array<number | null>>];

export class MetricHistory {
  private readonly clusters = new Map<string, ClusterHistory>();

  add(overview: Overview): void {
    const t = overview.generatedAt / 1000;
    for (const c of overview.clusters) {
      let h = this.clusters.get(c.name);
      if (h === undefined) {
        h = { times: [], rps: new Map(), p99: new Map() };
        this.clusters.set(c.name, h);
      }
      const last = h.times[h.times.length - 1];
      if (last !== undefined && t <= last) continue;
      const n = h.times.length;
      h.times.push(t);
      const seen = new Set<string>();
      for (const m of c.members) {
        seen.add(m.id);
        // (A remote cluster's members have no pid: their state says whether they answer.)
        const dead = m.state === 'down' || m.state === 'removed' || m.state === 'paused';
        push(h.rps, m.id, n, dead ? null : m.metrics.requestsPerSec);
        push(h.p99, m.id, n, dead ? null : m.metrics.p99Ms);
      }
      // A member missing from this sample (removed) gets a gap.
      for (const [id, col] of h.rps) if (!seen.has(id)) col.push(null);
      for (const [id, col] of h.p99) if (!seen.has(id)) col.push(null);
      this.prune(h, t);
    }
    // Clusters gone from the data root stop being remembered.
    const names = new Set(overview.clusters.map((c) => c.name));
    for (const name of this.clusters.keys()) if (!names.has(name)) this.clusters.delete(name);
  }

  /** The member ids charted for a cluster, in first-seen order. */
  members(cluster: string): string[] {
    return [...(this.clusters.get(cluster)?.rps.keys() ?? [])];
  }

  columns(cluster: string, which: 'rps' | 'p99'): Columns {
    const h = this.clusters.get(cluster);
    if (h === undefined) return [[]];
    const cols = which === 'rps' ? h.rps : h.p99;
    return [h.times.slice(), ...[...cols.values()].map((c) => c.slice())];
  }

  private prune(h: ClusterHistory, now: number): void {
    let drop = 0;
    while (drop < h.times.length && h.times[drop]! < now - WINDOW_MS / 1000) drop++;
    if (drop === 0) return;
    h.times.splice(0, drop);
    for (const col of [...h.rps.values(), ...h.p99.values()]) col.splice(0, drop);
  }
}

/** A column for a member first seen at sample `n`: earlier samples are gaps. */
function push(cols: Map<string, Array<number | null>>, id: string, n: number, value: number | null): void {
  let col = cols.get(id);
  if (col === undefined) {
    col = new Array<number | null>(n).fill(null);
    cols.set(id, col);
  }
  col.push(value);
}
