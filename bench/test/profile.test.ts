/** Reading CPU profiles: self samples by function and by area, idle left out of the shares, a window of a run. */
import t from 'tap';
import { areaOf, formatSummary, summarize, windowed, type CpuProfile } from '../src/profile.js';

const frame = (id: number, functionName: string, url: string, hitCount: number, lineNumber = 0) => ({
  id,
  callFrame: { functionName, url, lineNumber },
  hitCount,
});
const profile: CpuProfile = {
  startTime: 0,
  endTime: 1,
  nodes: [
    frame(1, '(root)', '', 0),
    frame(2, '(idle)', '', 50),
    frame(3, 'encode', 'file:///work/main/node_modules/msgpackr/pack.js', 20, 9),
    frame(4, 'step', 'file:///work/main/packages/lib/raft/dist/src/core.js', 15, 99),
    frame(5, 'writeGeneric', 'node:internal/stream_base_commons', 10),
    frame(6, '(garbage collector)', '', 5),
  ],
};

t.test('summarize ranks self time', async (t) => {
  const s = summarize([profile, profile]);
  t.equal(s.idleSamples, 100);
  t.equal(s.busySamples, 100);
  t.same(
    s.areas.map((a) => [a.name, a.percent]),
    [
      ['msgpackr', 40],
      ['packages/lib/raft', 30],
      ['node:internal/stream_base_commons', 20],
      ['(garbage collector)', 10],
    ],
  );
  t.equal(s.functions[0]!.name, 'encode msgpackr/pack.js:10');
  t.equal(s.functions[1]!.name, 'step packages/lib/raft/dist/src/core.js:100');
  t.match(formatSummary(s, 'leader'), /leader: 100 busy samples of 200 \(50% busy\)/);
});

t.test('areaOf', async (t) => {
  t.equal(areaOf('file:///x/node_modules/@scope/pkg/a.js', 'f'), '@scope/pkg');
  t.equal(areaOf('file:///work/main/cluster/dist/src/host.js', 'f'), 'cluster');
  t.equal(areaOf('', '(program)'), '(program)');
  t.equal(areaOf('', 'memcpy'), 'native');
});

t.test('windowed counts the samples taken inside the window only', async (t) => {
  // Samples at 1000 (node 3), 1010 (4), 1020 (3), 1030 (5) µs: the window 1005..1025 holds the middle two.
  const timed: CpuProfile = { ...profile, startTime: 1000, samples: [3, 4, 3, 5], timeDeltas: [0, 10, 10, 10] };
  const w = windowed(timed, { fromUs: 1005, toUs: 1025 });
  t.same(
    w.nodes.filter((n) => (n.hitCount ?? 0) > 0).map((n) => [n.id, n.hitCount]),
    [
      [3, 1],
      [4, 1],
    ],
  );
  t.equal(windowed(profile, { fromUs: 0, toUs: 1 }), profile, 'a profile without sample times is left whole');
});
