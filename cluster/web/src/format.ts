/** How numbers read in the tables: unknown (a dead process) is a dash, never 0. */

export function num(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : String(v);
}

export function percent(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : `${v.toFixed(v < 10 ? 1 : 0)}%`;
}

export function bytes(v: number | null | undefined): string {
  if (v === null || v === undefined) return '–';
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(0)} KiB`;
  return `${(v / (1024 * 1024)).toFixed(v < 100 * 1024 * 1024 ? 1 : 0)} MiB`;
}

export function ms(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : `${v < 10 ? v.toFixed(1) : v.toFixed(0)} ms`;
}

export function rate(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : v < 10 ? v.toFixed(1) : v.toFixed(0);
}

export function clock(at: number): string {
  const d = new Date(at);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** One colour per member, the same in the tables' chips and the charts' lines. */
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563'];

export function colour(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}
