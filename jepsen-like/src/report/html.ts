/**
 * DIR/report.html: one self-contained page (inline CSS, SVG and a few lines of JS for zooming; no network):
 * the verdict and every check, the operation counts, the faults, and a timeline of operations per client
 * with the faults drawn behind them. For a history that is not linearizable, the failing window is
 * highlighted, with the model's state before it and the operations that cannot be linearized.
 */
import type { FailureWindow, LinearizabilityResult } from '../check.js';
import type { HistoryEvent, OpCounts } from '../history.js';
import type { Anomaly, CheckResult } from '../workloads/workload.js';

interface ReportFault {
  id: number;
  nemesis: string;
  description: string;
  targets: string[];
  start: number;
  stop: number | null;
}

interface ReportInput {
  events: readonly HistoryEvent[];
  result: {
    valid: boolean | 'unknown';
    anomalies: readonly Anomaly[];
    ops: OpCounts;
    faults?: readonly ReportFault[];
    checks: readonly CheckResult[];
    run?: Record<string, unknown>;
  };
  /** Units of `time`: nanoseconds (our histories, Jepsen's) or plain event indexes (logs without times). */
  timeUnit?: 'ns' | 'index';
  title?: string;
}

interface DrawnOp {
  process: number;
  f: string;
  key?: string;
  invokeValue: unknown;
  value: unknown;
  type: 'ok' | 'fail' | 'info' | 'open';
  error?: string;
  node?: string;
  call: number;
  ret: number | null;
  lane: number;
}

const NEMESIS_COLORS: Record<string, string> = {
  partition: '#3b82f6',
  kill: '#ef4444',
  wipe: '#7f1d1d',
  pause: '#a855f7',
  packet: '#14b8a6',
  clock: '#eab308',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function short(value: unknown): string {
  if (value === undefined) return '';
  if (value === null) return 'nil';
  if (Array.isArray(value)) return value.map(short).join('→');
  if (typeof value === 'object') {
    const v = value as Record<string, unknown>;
    if ('granted' in v) return v.granted ? `✓${String(v.token ?? '')}` : '✗';
    if ('holder' in v) return `${v.holder === null ? 'free' : String(v.holder).slice(0, 4)} t${String(v.token ?? '')}`;
    if ('token' in v) return `t${String(v.token)}`;
    return JSON.stringify(value);
  }
  const text = String(value);
  return text.length > 12 ? text.slice(0, 11) + '…' : text;
}

function label(op: DrawnOp): string {
  const f = { read: 'r', write: 'w', cas: 'cas', acquire: 'acq', release: 'rel', 'open-session': 'open' }[op.f] ?? op.f;
  const value = op.f === 'read' || op.f === 'acquire' ? short(op.value) : short(op.invokeValue);
  return `${f}${op.key !== undefined && op.f !== 'write' ? ' ' + op.key : ''}${value !== '' ? ' ' + value : ''}`;
}

function pairOps(events: readonly HistoryEvent[]): DrawnOp[] {
  const open = new Map<number, DrawnOp>();
  const ops: DrawnOp[] = [];
  for (const e of events) {
    if (typeof e.process !== 'number') continue;
    if (e.type === 'invoke') {
      const op: DrawnOp = {
        process: e.process,
        f: e.f,
        ...(e.key !== undefined ? { key: e.key } : {}),
        invokeValue: e.value,
        value: undefined,
        type: 'open',
        ...(e.node !== undefined ? { node: e.node } : {}),
        call: e.time,
        ret: null,
        lane: 0,
      };
      open.set(e.process, op);
      ops.push(op);
    } else {
      const op = open.get(e.process);
      if (!op) continue;
      open.delete(e.process);
      op.type = e.type;
      op.value = e.value;
      if (e.error !== undefined) op.error = e.error;
      op.ret = e.time;
    }
  }
  return ops;
}

/** Faults from the nemesis events of a history (start-X / stop-X pairs by value.id). */
export function faultsFromHistory(events: readonly HistoryEvent[]): ReportFault[] {
  const faults = new Map<number, ReportFault>();
  for (const e of events) {
    if (e.process !== 'nemesis') continue;
    const v = (e.value ?? {}) as { id?: number; description?: string; targets?: string[] };
    const m = /^(start|stop)-(.+)$/.exec(e.f);
    if (m === null || typeof v.id !== 'number') continue;
    if (m[1] === 'start')
      faults.set(v.id, {
        id: v.id,
        nemesis: m[2]!,
        description: v.description ?? m[2]!,
        targets: v.targets ?? [],
        start: e.time,
        stop: null,
      });
    else {
      const f = faults.get(v.id);
      if (f) f.stop = e.time;
    }
  }
  return [...faults.values()];
}

function niceStep(span: number, target: number): number {
  const raw = span / target;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (raw <= m * power) return m * power;
  return 10 * power;
}

export function renderReport(input: ReportInput): string {
  const { events, result } = input;
  const unit = input.timeUnit ?? 'ns';
  const perSecond = unit === 'ns' ? 1e9 : 1;
  const unitLabel = unit === 'ns' ? 's' : '';
  const fmt = (t: number, digits: number): string =>
    unit === 'ns' ? (t / perSecond).toFixed(digits) : String(Math.round(t));
  const ops = pairOps(events);
  const faults = result.faults ?? faultsFromHistory(events);
  const lin = result.checks.find((c) => c.name === 'linearizable') as LinearizabilityResult | undefined;
  const window: FailureWindow | undefined = lin?.window;
  const concurrency = typeof result.run?.concurrency === 'number' ? (result.run.concurrency as number) : null;
  const finalCalls = new Set(events.filter((e) => e.node === 'final').map((e) => e.process));
  const heal = events.find((e) => e.process === 'nemesis' && e.f === 'heal');
  const lastTime = Math.max(1, ...events.map((e) => e.time));
  const end = lastTime;

  // Lanes: one per client thread (process mod concurrency) when known, the final reads apart; otherwise greedy.
  let laneNames: string[];
  const members = Array.isArray(result.run?.members) ? (result.run.members as string[]) : [];
  if (concurrency !== null) {
    laneNames = Array.from(
      { length: concurrency },
      (_, i) => `client ${i}${members.length > 0 ? ` → ${members[i % members.length]}` : ''}`,
    );
    const finalLane = finalCalls.size > 0 ? laneNames.push('final reads') - 1 : -1;
    for (const op of ops) op.lane = finalCalls.has(op.process) ? finalLane : op.process % concurrency;
  } else {
    const laneEnds: number[] = [];
    for (const op of [...ops].sort((a, b) => a.call - b.call)) {
      const stop = op.ret ?? end;
      let lane = laneEnds.findIndex((t) => t < op.call);
      if (lane < 0) lane = laneEnds.push(0) - 1;
      laneEnds[lane] = stop;
      op.lane = lane;
    }
    laneNames = laneEnds.map((_, i) => `lane ${i}`);
  }

  const windowKeys = new Set(
    (window?.ops ?? []).filter((o) => o.role === 'window').map((o) => `${o.process}@${o.call}`),
  );
  const contextKeys = new Set(
    (window?.ops ?? []).filter((o) => o.role === 'context').map((o) => `${o.process}@${o.call}`),
  );

  // Geometry (x in "time units"; the initial scale fits ~1300 px, zoom rescales through data attributes).
  const left = 12;
  const namesWidth = 130;
  const names: string[] = [];
  const spanSeconds = end / perSecond;
  const scale = Math.max(unit === 'ns' ? 4 : 2, Math.min(unit === 'ns' ? 400 : 40, 1300 / Math.max(spanSeconds, 1e-9)));
  const laneHeight = 22;
  const families = [...new Set(faults.map((f) => f.nemesis))];
  const faultRowHeight = 18;
  const faultTop = 28;
  const lanesTop = faultTop + families.length * faultRowHeight + 10;
  const height = lanesTop + laneNames.length * laneHeight + 24;
  const width = left + spanSeconds * scale + 40;
  const X = (t: number): number => left + (t / perSecond) * scale;
  const parts: string[] = [];
  const ds = (a: number, b: number): string => `data-a="${a / perSecond}" data-b="${b / perSecond}"`;

  // Axis.
  const step = niceStep(spanSeconds, Math.max(4, Math.floor((spanSeconds * scale) / 110)));
  for (let s = 0; s <= spanSeconds + 1e-9; s += step) {
    const x = left + s * scale;
    parts.push(
      `<line class="grid" x1="${x}" x2="${x}" y1="${faultTop - 6}" y2="${height - 20}" data-a="${s}" data-b="${s}"/>`,
    );
    parts.push(
      `<text class="tick" x="${x}" y="${height - 6}" data-a="${s}" data-b="${s}" data-anchor="middle">${Number(s.toFixed(3))}${unitLabel}</text>`,
    );
  }
  // Faults: a band behind the lanes and a labelled bar in the family's row.
  faults.forEach((f) => {
    const row = families.indexOf(f.nemesis);
    const a = f.start;
    const b = f.stop ?? end;
    const color = NEMESIS_COLORS[f.nemesis] ?? '#64748b';
    const title = `<title>${escapeHtml(`${f.description}\n${fmt(a, 2)} – ${fmt(b, 2)}${unitLabel}`)}</title>`;
    parts.push(
      `<rect class="band" x="${X(a)}" width="${X(b) - X(a)}" y="${lanesTop - 4}" height="${laneNames.length * laneHeight + 6}" fill="${color}" ${ds(a, b)}>${title}</rect>`,
    );
    parts.push(
      `<rect class="fault" x="${X(a)}" width="${Math.max(2, X(b) - X(a))}" y="${faultTop + row * faultRowHeight}" height="${faultRowHeight - 4}" fill="${color}" ${ds(a, b)}>${title}</rect>`,
    );
    parts.push(
      `<text class="faultlabel" x="${X(a) + 3}" y="${faultTop + row * faultRowHeight + 11}" data-a="${a / perSecond}" data-b="${b / perSecond}" data-pad="3" data-fit="1">${escapeHtml(f.description)}</text>`,
    );
  });
  families.forEach((name, row) =>
    names.push(
      `<text class="lanename" x="${namesWidth - 8}" y="${faultTop + row * faultRowHeight + 11}">${escapeHtml(name)}</text>`,
    ),
  );
  if (heal)
    parts.push(
      `<line class="heal" x1="${X(heal.time)}" x2="${X(heal.time)}" y1="${faultTop - 6}" y2="${height - 20}" ${ds(heal.time, heal.time)}><title>final heal</title></line>`,
    );
  // Failure window.
  if (window) {
    const a = window.start;
    const b = window.end;
    parts.push(
      `<rect class="window" x="${X(a) - 2}" width="${X(b) - X(a) + 4}" y="${faultTop - 8}" height="${height - faultTop - 10}" ${ds(a, b)} data-pad="-2" data-grow="4"><title>${escapeHtml(`failing window: state before it ${window.stateBefore}`)}</title></rect>`,
    );
  }
  // Lanes and operations.
  laneNames.forEach((name, i) => {
    const y = lanesTop + i * laneHeight;
    parts.push(`<rect class="lane${i % 2}" x="0" width="100%" y="${y}" height="${laneHeight}"/>`);
    names.push(
      `<rect class="lane${i % 2}" x="0" width="100%" y="${y}" height="${laneHeight}"/><text class="lanename" x="${namesWidth - 8}" y="${y + 15}">${escapeHtml(name)}</text>`,
    );
  });
  for (const op of ops) {
    const a = op.call;
    const b = op.ret ?? end;
    const y = lanesTop + op.lane * laneHeight + 3;
    const k = `${op.process}@${op.call}`;
    const cls = `op ${op.type}${op.f === 'write' && op.error === 'fenced' ? ' fenced' : ''}${windowKeys.has(k) ? ' inwindow' : contextKeys.has(k) ? ' incontext' : ''}`;
    const tip = [
      `process ${op.process}${op.node ? ` → ${op.node}` : ''}`,
      `${op.f}${op.key !== undefined ? ` ${op.key}` : ''} ${op.invokeValue === undefined ? '' : JSON.stringify(op.invokeValue)}`,
      `${op.type}${op.value !== undefined ? ` ${JSON.stringify(op.value)}` : ''}${op.error ? ` (${op.error})` : ''}`,
      `${fmt(a, 4)} – ${op.ret === null ? '?' : fmt(b, 4)}${unitLabel}`,
    ].join('\n');
    parts.push(
      `<g><rect class="${cls}" x="${X(a)}" width="${Math.max(2, X(b) - X(a))}" y="${y}" height="${laneHeight - 6}" rx="2" ${ds(a, b)} data-min="2"><title>${escapeHtml(tip)}</title></rect>`,
    );
    parts.push(
      `<text class="oplabel" x="${X(a) + 2}" y="${y + 12}" ${ds(a, b)} data-pad="2" data-fit="1">${escapeHtml(label(op))}</text></g>`,
    );
  }
  const namesSvg = `<svg class="names" xmlns="http://www.w3.org/2000/svg" width="${namesWidth}" height="${height}">${names.join('')}</svg>`;
  const svg = `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" data-left="${left}" data-scale="${scale}">${parts.join('')}</svg>`;

  // "show the failing window" zooms to it and the operations that explain the state before it.
  const viewStart = window ? Math.min(window.start, ...window.ops.map((w) => w.call)) : 0;
  const viewEnd = window ? Math.max(window.end, ...window.ops.map((w) => w.return ?? window.end)) : 0;
  const verdict = result.valid === true ? 'valid' : result.valid === false ? 'invalid' : 'unknown';
  const run = result.run ?? {};
  const runRows = Object.entries(run)
    .filter(([k]) => !['members', 'notes', 'out', 'runId'].includes(k))
    .map(([k, v]) => `<span><b>${escapeHtml(k)}</b> ${escapeHtml(Array.isArray(v) ? v.join(', ') : String(v))}</span>`)
    .join(' ');
  const notes = Array.isArray(run.notes)
    ? (run.notes as string[]).map((n) => `<li>${escapeHtml(n)}</li>`).join('')
    : '';
  const checkRows = result.checks
    .map((c) => {
      const cls = c.valid === true ? 'valid' : c.valid === false ? 'invalid' : 'unknown';
      const extra =
        c.name === 'linearizable'
          ? `model ${(c as LinearizabilityResult).model}, ${(c as LinearizabilityResult).partitions} partition(s), ${(c as LinearizabilityResult).steps} steps, ${(c as LinearizabilityResult).ms.toFixed(0)} ms`
          : c.stats
            ? Object.entries(c.stats)
                .map(([k, v]) => `${k} ${String(v)}`)
                .join(', ')
            : '';
      return `<tr><th>${escapeHtml(c.name)}</th><td><span class="badge ${cls}">${String(c.valid)}</span></td><td>${escapeHtml(extra)}</td></tr>`;
    })
    .join('');
  const o = result.ops;
  const byF = Object.entries(o.byF)
    .map(([f, c]) => `<tr><th>${escapeHtml(f)}</th><td>${c.ok}</td><td>${c.fail}</td><td>${c.info}</td></tr>`)
    .join('');
  const anomalies = result.anomalies
    .slice(0, 50)
    .map((a) => `<li><b>${escapeHtml(a.check)}</b> ${escapeHtml(a.type)}: ${escapeHtml(a.description)}</li>`)
    .join('');
  const faultRows = faults
    .map(
      (f) =>
        `<tr><td><span class="swatch" style="background:${NEMESIS_COLORS[f.nemesis] ?? '#64748b'}"></span>${escapeHtml(f.nemesis)}</td><td>${fmt(f.start, 2)}</td><td>${f.stop === null ? '–' : fmt(f.stop, 2)}</td><td>${escapeHtml(f.description)}</td></tr>`,
    )
    .join('');
  let windowHtml = '';
  if (window) {
    const rows = window.ops
      .map(
        (w) =>
          `<tr class="${w.role}"><td>${w.role === 'window' ? 'cannot linearize' : 'linearized before'}</td><td>${w.process}</td><td>${fmt(w.call, 4)}</td><td>${w.return === null ? '?' : fmt(w.return, 4)}</td><td><code>${escapeHtml(w.description)}</code></td></tr>`,
      )
      .join('');
    windowHtml = `<section class="failure"><h2>Not linearizable</h2>
<p>Partition ${window.partition}: the history can be linearized up to ${window.prefixLength} operation(s), ending in the state</p>
<pre>${escapeHtml(window.stateBefore)}</pre>
<p>From there, ${window.blocked ? `<code>${escapeHtml(window.blocked)}</code> and the operations` : 'the operations'} below (highlighted in the timeline, between ${fmt(window.start, 4)} and ${fmt(window.end, 4)}${unitLabel}) cannot be linearized: no order of them that respects real time is legal for the model. This is the earliest point of the history at which it fails.</p>
<table class="ops"><tr><th></th><th>process</th><th>call</th><th>return</th><th>operation</th></tr>${rows}</table></section>`;
  }
  const explanation = lin?.explanation && !window ? `<pre>${escapeHtml(lin.explanation.slice(0, 4000))}</pre>` : '';

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title ?? `jepsen-like: ${String(run.workload ?? 'history')} ${verdict}`)}</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px;color:#0f172a;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:18px 0 6px}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-weight:600;color:#fff}
.badge.valid{background:#16a34a}.badge.invalid{background:#dc2626}.badge.unknown{background:#d97706}
.cols{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}
table{border-collapse:collapse}th,td{padding:2px 10px 2px 0;text-align:left;vertical-align:top}th{font-weight:600}
table.ops td,table.ops th{border-bottom:1px solid #e2e8f0;padding:2px 8px}
tr.window td{background:#fee2e2}tr.context td{background:#f1f5f9}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}
.failure{border:2px solid #dc2626;border-radius:6px;padding:4px 14px;background:#fff7f7;margin:12px 0}
pre{background:#f8fafc;border:1px solid #e2e8f0;padding:6px 10px;overflow:auto;max-height:260px}
#frame{display:flex;border:1px solid #cbd5e1;border-radius:4px;margin-top:6px}#scroller{overflow-x:auto;flex:1}svg.names{flex:none;border-right:1px solid #cbd5e1}
svg text{font:11px system-ui,sans-serif}
.lane0{fill:#ffffff;fill-opacity:0}.lane1{fill:#0f172a;fill-opacity:.035}.grid{stroke:#e2e8f0}.tick{fill:#475569;text-anchor:middle}
.lanename{fill:#334155;text-anchor:end;font-weight:600}
.band{opacity:.13}.fault{opacity:.85}.faultlabel{fill:#fff;font-weight:600;pointer-events:none}
.heal{stroke:#16a34a;stroke-width:2;stroke-dasharray:5 3}
.op{stroke:#0f172a;stroke-opacity:.25}.op.ok{fill:#86efac}.op.fail{fill:#fda4af}.op.info{fill:#fdba74}.op.open{fill:#e2e8f0}
.op.fenced{fill:#be123c}
.op.inwindow{stroke:#b91c1c;stroke-width:3;stroke-opacity:1}.op.incontext{stroke:#1e293b;stroke-width:1.5;stroke-dasharray:3 2;stroke-opacity:1}
.oplabel{fill:#0f172a;pointer-events:none}
.window{fill:#fde047;fill-opacity:.28;stroke:#dc2626;stroke-width:2}
.legend span{margin-right:14px}.legend i{display:inline-block;width:18px;height:10px;margin-right:4px;border:1px solid #94a3b8;vertical-align:middle}
button{font:inherit;padding:1px 8px;margin-right:4px}
.run span{display:inline-block;margin-right:16px;color:#334155}.run b{color:#0f172a}.notes{margin:4px 0;color:#334155}
</style></head><body>
<h1>jepsen-like report: ${escapeHtml(String(run.workload ?? 'history'))} <span class="badge ${verdict}">${verdict}</span></h1>
<p class="run">${runRows}</p>${notes ? `<ul class="notes">${notes}</ul>` : ''}
<div class="cols">
<div><h2>Checks</h2><table>${checkRows}</table>
</div><div><h2>Operations</h2><table><tr><th></th><th>ok</th><th>fail</th><th>info</th></tr><tr><th>all (${o.total})</th><td>${o.ok}</td><td>${o.fail}</td><td>${o.info}</td></tr>${byF}</table></div>
${faults.length > 0 ? `<div><h2>Faults</h2><table class="ops"><tr><th>nemesis</th><th>start${unitLabel ? ' (s)' : ''}</th><th>stop</th><th>what</th></tr>${faultRows}</table></div>` : ''}
</div>
${anomalies ? `<h2>Anomalies</h2><ul>${anomalies}</ul>` : ''}
${windowHtml}${explanation}
<h2>Timeline</h2>
<div class="legend"><span><i style="background:#86efac"></i>ok</span><span><i style="background:#fda4af"></i>fail</span><span><i style="background:#fdba74"></i>info (unknown)</span><span><i style="background:#be123c"></i>write refused by the fence</span>${window ? '<span><i style="background:#fef08a;border:2px solid #dc2626"></i>failing window</span>' : ''}${heal ? '<span><i style="border:2px dashed #16a34a"></i>final heal</span>' : ''}
zoom <button data-zoom="0.5">−</button><button data-zoom="2">+</button><button data-zoom="0">fit</button>${window ? `<button id="towindow" data-a="${viewStart / perSecond}" data-b="${viewEnd / perSecond}">show the failing window</button>` : ''} (hover an operation for details)</div>
<div id="frame">${namesSvg}<div id="scroller">${svg}</div></div>
<script>
(function(){var svg=document.getElementById('timeline');var left=+svg.dataset.left,base=+svg.dataset.scale,scale=base;
var els=svg.querySelectorAll('[data-a]');var scroller=document.getElementById('scroller');
function layout(){var maxX=0;els.forEach(function(el){var a=+el.dataset.a,b=+el.dataset.b,x=left+a*scale,w=(b-a)*scale;var pad=+(el.dataset.pad||0);
if(el.tagName==='rect'){el.setAttribute('x',x+pad);el.setAttribute('width',Math.max(+(el.dataset.min||0),w+(+(el.dataset.grow||0))));}
else if(el.tagName==='line'){el.setAttribute('x1',x);el.setAttribute('x2',x);}
else{el.setAttribute('x',x+pad);if(el.dataset.fit){el.style.display=(w>el.getComputedTextLength()+4)?'':'none';}}
maxX=Math.max(maxX,left+b*scale);});svg.setAttribute('width',maxX+40);}
document.querySelectorAll('button[data-zoom]').forEach(function(btn){btn.addEventListener('click',function(){var z=+btn.dataset.zoom;scale=z===0?base:scale*z;layout();});});
var tw=document.getElementById('towindow');if(tw){tw.addEventListener('click',function(ev){var a=+tw.dataset.a,b=+tw.dataset.b;var span=Math.max(b-a,1e-9);
scale=Math.max(base,Math.min(base*2000,(scroller.clientWidth*0.8)/span));layout();scroller.scrollLeft=Math.max(0,left+a*scale-scroller.clientWidth*0.1);
if(ev&&ev.isTrusted)svg.querySelector('.window').scrollIntoView({block:'center'});});}
layout();if(tw&&location.hash==='#window')tw.click();})();
</script>
</body></html>
`;
}
