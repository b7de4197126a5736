import t from 'tap';
import { checkLinearizability, countOps, renderReport, type HistoryEvent } from '../src/index.js';
import type { GenericEvent } from '@raftkit/linearizability';

const s = 1e9;
const history: HistoryEvent[] = [
  { process: 0, type: 'invoke', f: 'write', key: 'k', value: 1, time: 0.1 * s, node: 'n1' },
  { process: 0, type: 'ok', f: 'write', key: 'k', value: 1, time: 0.2 * s, node: 'n1' },
  {
    process: 'nemesis',
    type: 'info',
    f: 'start-partition',
    value: { id: 1, description: 'partition halves: n1 n2 | n3 n4 n5', targets: ['n1'] },
    time: 0.25 * s,
  },
  { process: 1, type: 'invoke', f: 'read', key: 'k', time: 0.3 * s, node: 'n2' },
  { process: 1, type: 'ok', f: 'read', key: 'k', value: 1, time: 0.4 * s, node: 'n2' },
  { process: 0, type: 'invoke', f: 'write', key: 'k', value: 2, time: 0.5 * s, node: 'n1' },
  { process: 0, type: 'ok', f: 'write', key: 'k', value: 2, time: 0.6 * s, node: 'n1' },
  { process: 'nemesis', type: 'info', f: 'stop-partition', value: { id: 1 }, time: 0.65 * s },
  { process: 1, type: 'invoke', f: 'read', key: 'k', time: 0.7 * s, node: 'n2' },
  { process: 1, type: 'ok', f: 'read', key: 'k', value: 1, time: 0.8 * s, node: 'n2' },
  { process: 'nemesis', type: 'info', f: 'heal', time: 0.85 * s },
];

function report(events: HistoryEvent[]): { html: string; valid: boolean | 'unknown' } {
  const lin = checkLinearizability('cas-register', events as unknown as GenericEvent[], { timeoutMs: 10_000 });
  const html = renderReport({
    events,
    result: {
      valid: lin.valid,
      anomalies: lin.anomalies,
      ops: countOps(events),
      checks: [lin],
      run: { workload: 'kv', concurrency: 2, members: ['n1', 'n2'] },
    },
  });
  return { html, valid: lin.valid };
}

t.test('an invalid history: the failing window, its state before, drawn in the timeline', async (t) => {
  const { html, valid } = report(history);
  t.equal(valid, false, 'a stale read after write(2)');
  t.match(html, /<span class="badge invalid">invalid<\/span>/);
  t.match(html, /<h2>Not linearizable<\/h2>/);
  t.match(html, /<pre>\{&quot;k&quot;: 2\}<\/pre>/, "the model's state before the window");
  t.match(html, /cannot linearize<\/td><td>1<\/td>/, 'the stale read is the window');
  t.match(html, /class="window"/, 'highlighted in the timeline');
  t.match(html, /class="op ok inwindow"/);
  t.match(html, /partition halves: n1 n2 \| n3 n4 n5/, 'the fault is drawn');
  t.match(html, /client 1 → n2/, 'lanes per client with their member');
});

t.test('a valid history renders without a failure section, self-contained', async (t) => {
  const fixed = history.map((e) => (e.process === 1 && e.type === 'ok' && e.time === 0.8 * s ? { ...e, value: 2 } : e));
  const { html, valid } = report(fixed);
  t.equal(valid, true);
  t.match(html, /<span class="badge valid">valid<\/span>/);
  t.notMatch(html, /Not linearizable/);
  t.notMatch(html, /(src|href)=["']?https?:/, 'nothing loaded from the network');
  t.notMatch(html, /<link |<script src/, 'no external CSS or JS');
  t.match(html, /<svg id="timeline"/);
});

t.test('text from histories is escaped', async (t) => {
  const evil: HistoryEvent[] = [
    { process: 0, type: 'invoke', f: 'write', key: '<b>x</b>', value: '<script>alert(1)</script>', time: 1 },
    { process: 0, type: 'ok', f: 'write', key: '<b>x</b>', value: '<script>alert(1)</script>', time: 2 },
  ];
  const { html } = report(evil);
  t.notMatch(html, /<script>alert/);
  t.match(html, /&lt;script&gt;alert/);
});
