/**
 * Requests/s and p99 per member over the last five minutes, drawn by uPlot (small, fast canvas time series). The
 * chart is made once per member set and fed new columns on each push, so a push costs one redraw, not a rebuild.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Columns } from './history.js';

export function Chart({
  title,
  unit,
  members,
  colourOf,
  columns,
  faults,
  testid,
}: {
  title: string;
  unit: string;
  members: string[];
  colourOf: (id: string) => string;
  columns: Columns;
  /** Times (ms) of the faults, drawn as dashed red lines so a dip lines up with its cause. */
  faults: number[];
  testid: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const faultTimes = useRef(faults);
  faultTimes.current = faults;
  const key = members.join(',');

  useEffect(() => {
    const el = box.current;
    if (el === null) return;
    const opts: uPlot.Options = {
      title,
      width: Math.max(300, el.clientWidth),
      height: 220,
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [{}, { label: unit, size: 60 }],
      series: [
        {},
        ...members.map((id) => ({
          label: id,
          stroke: colourOf(id),
          width: 2,
          spanGaps: false,
          points: { show: false },
        })),
      ],
      legend: { live: false },
      hooks: { draw: [(u) => drawFaults(u, faultTimes.current)] },
    };
    const u = new uPlot(opts, columns as uPlot.AlignedData, el);
    plot.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(300, el.clientWidth), height: 220 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
    // The chart is rebuilt only when the member set changes; data flows through setData below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, title, unit]);

  useEffect(() => {
    plot.current?.setData(columns as uPlot.AlignedData);
  }, [columns]);

  return <div class="chart" data-testid={testid} ref={box} />;
}

/** Fault markers on top of the plot, through uPlot's draw hook (its own scales and canvas). */
function drawFaults(u: uPlot, faults: number[]): void {
  const { ctx, bbox } = u;
  ctx.save();
  ctx.strokeStyle = '#dc2626';
  ctx.lineWidth = 1.5 * devicePixelRatio;
  ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
  for (const at of faults) {
    const x = u.valToPos(at / 1000, 'x', true);
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
  }
  ctx.restore();
}
