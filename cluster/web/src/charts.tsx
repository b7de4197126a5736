/**
 * Requests/s and p99 per member over the last five minutes, drawn by uPlot (small, fast canvas time series). The
 * chart is made once per member set and fed new columns on each push, so a push costs one redraw, not a rebuild.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Columns } from './history.js';

export function Chart({ title, unit, members, colourOf, columns, testid }: {
  title: string;
  unit: string;
  members: string[];
  colourOf: (id: string) => string;
  columns: Columns;
  testid: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
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
      series: [{}, ...members.map((id) => ({ label: id, stroke: colourOf(id), width: 2, spanGaps: false, points: { show: false } }))],
      legend: { live: false },
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
