/**
 * A small hand-made SVG bar chart of a report: throughput on the left (ours beside the peer or the target),
 * p50 and p99 latency on the right (ours beside the peer). Plain SVG 1.1, no scripts, no external fonts.
 */
import type { Report } from './report.js';

const W = 760;
const H = 360;
const OURS = '#2f6db5';
const PEER = '#9a9a9a';
const TARGET = '#d9a441';

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** The smallest "nice" number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above x. */
export function niceCeil(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function formatNumber(x: number): string {
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  if (x >= 100) return Math.round(x).toLocaleString('en-US');
  if (x >= 10) return x.toFixed(1);
  return x.toFixed(2);
}

interface Bar {
  label: string;
  value: number;
  color: string;
}

interface Group {
  label: string;
  bars: Bar[];
}

/** One panel: axes, 4 grid lines, grouped bars with their values on top. */
function panel(x: number, y: number, w: number, h: number, title: string, unit: string, groups: Group[]): string {
  const max = niceCeil(Math.max(...groups.flatMap((g) => g.bars.map((b) => b.value)), 0) * 1.1);
  const out: string[] = [];
  out.push(
    `<text x="${x + w / 2}" y="${y - 12}" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(`${title} (${unit})`)}</text>`,
  );
  for (let i = 0; i <= 4; i++) {
    const gy = y + h - (h * i) / 4;
    out.push(`<line x1="${x}" y1="${gy}" x2="${x + w}" y2="${gy}" stroke="#e3e3e3"/>`);
    out.push(
      `<text x="${x - 6}" y="${gy + 4}" text-anchor="end" font-size="11" fill="#555">${escapeXml(formatNumber((max * i) / 4))}</text>`,
    );
  }
  const gw = w / groups.length;
  groups.forEach((g, gi) => {
    const bw = Math.min(70, (gw * 0.7) / g.bars.length);
    const start = x + gi * gw + (gw - bw * g.bars.length) / 2;
    g.bars.forEach((b, bi) => {
      const bh = max === 0 ? 0 : (h * b.value) / max;
      const bx = start + bi * bw;
      out.push(
        `<rect x="${r(bx + 2)}" y="${r(y + h - bh)}" width="${r(bw - 4)}" height="${r(bh)}" fill="${b.color}"><title>${escapeXml(`${b.label}: ${formatNumber(b.value)} ${unit}`)}</title></rect>`,
      );
      out.push(
        `<text x="${r(bx + bw / 2)}" y="${r(y + h - bh - 5)}" text-anchor="middle" font-size="11">${escapeXml(formatNumber(b.value))}</text>`,
      );
    });
    if (g.label !== '')
      out.push(
        `<text x="${r(x + gi * gw + gw / 2)}" y="${y + h + 18}" text-anchor="middle" font-size="12">${escapeXml(g.label)}</text>`,
      );
  });
  out.push(`<line x1="${x}" y1="${y + h}" x2="${x + w}" y2="${y + h}" stroke="#333"/>`);
  return out.join('\n');
}

/** Colour keys in one row, each as wide as its text (about 6.5 px a character at 12 px). */
function legend(items: Bar[]): string {
  let x = 80;
  const out: string[] = [];
  for (const b of items) {
    out.push(
      `<rect x="${x}" y="${H - 46}" width="12" height="12" fill="${b.color}"/><text x="${x + 18}" y="${H - 36}" font-size="12">${escapeXml(b.label)}</text>`,
    );
    x += 40 + Math.round(b.label.length * 6.5);
  }
  return out.join('\n');
}

function r(x: number): number {
  return Math.round(x * 10) / 10;
}

export function renderSvg(report: Report): string {
  const peerName = report.peer_name ?? 'peer';
  const ours: Bar = { label: 'ours', value: report.ours.ops_per_sec, color: OURS };
  const left: Bar[] = [ours];
  if (report.peer !== null) left.push({ label: peerName, value: report.peer.ops_per_sec, color: PEER });
  if (report.target !== null) left.push({ label: 'target', value: report.target.ops_per_sec, color: TARGET });
  const latency = (q: 'p50_ms' | 'p99_ms', label: string): Group => ({
    label,
    bars: [
      { label: `ours ${label}`, value: report.ours[q], color: OURS },
      ...(report.peer !== null ? [{ label: `${peerName} ${label}`, value: report.peer[q], color: PEER }] : []),
    ],
  });
  const env = report.environment;
  const rounds = Array.isArray(report.ours.rounds_ops_per_sec) ? report.ours.rounds_ops_per_sec.length : 1;
  const measured =
    rounds > 1 ? `${env.duration_s} s measured, median of ${rounds} rounds` : `${env.duration_s} s measured`;
  const subtitle = `${env.date.slice(0, 10)} · concurrency ${env.concurrency} · ${measured} · ${env.cpus} CPUs (${env.cpu_model}) · Node ${env.node}`;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">${escapeXml(report.title.slice(0, 90))}</text>`,
    `<text x="${W / 2}" y="42" text-anchor="middle" font-size="11" fill="#555">${escapeXml(subtitle)}</text>`,
    panel(
      80,
      90,
      250,
      200,
      'Throughput',
      'ops/s',
      left.map((b) => ({ label: b.label, bars: [b] })),
    ),
    panel(460, 90, 270, 200, 'Latency', 'ms', [latency('p50_ms', 'p50'), latency('p99_ms', 'p99')]),
    legend(
      left.map((b) => ({
        ...b,
        label:
          b.label === 'ours'
            ? `ours: ${report.ours.system}`
            : b.label === peerName && report.peer !== null
              ? `${peerName}: ${report.peer.system}`
              : `target: ${formatNumber(b.value)} ops/s`,
      })),
    ),
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle" font-size="11" fill="#333">${escapeXml(report.verdict.slice(0, 120))}</text>`,
    '</svg>',
  ];
  return parts.join('\n') + '\n';
}
