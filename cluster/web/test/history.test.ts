// The charts' history without a browser: samples per member in uPlot's column shape, gaps for dead and new
// members, the five-minute window, clusters that come and go.
import t from 'tap';
import { MetricHistory, WINDOW_MS } from '../src/history.js';
import type { ClusterView, MemberView, Overview } from '../src/types.js';

function member(
  id: string,
  rps: number | null,
  p99: number | null,
  state: MemberView['state'] = 'follower',
): MemberView {
  const down = state === 'down';
  return {
    id,
    state,
    pid: down ? null : 100,
    term: 1,
    leader: 'n1',
    commit: 1,
    applied: 1,
    lag: 0,
    cpuPercent: 1,
    rssBytes: 1,
    httpAddress: '127.0.0.1:1',
    raftAddress: '127.0.0.1:2',
    groupsLed: 0,
    metrics: { requestsPerSec: rps, p50Ms: null, p99Ms: p99 },
    role: down ? null : 'follower',
    latencyMs: down ? null : 3,
    missedPolls: 0,
  };
}

function overview(at: number, clusters: Array<[string, MemberView[]]>): Overview {
  return {
    generatedAt: at,
    clusters: clusters.map(
      ([name, members]): ClusterView => ({
        name,
        service: 'kv',
        dataDir: `/d/${name}`,
        members,
        workers: [],
        groups: [],
        partition: null,
      }),
    ),
  };
}

t.test('one column per member, aligned on the sample times', async (t) => {
  const h = new MetricHistory();
  h.add(overview(1000, [['a', [member('n1', 5, 2), member('n2', 3, 4)]]]));
  h.add(overview(2000, [['a', [member('n1', 6, 3), member('n2', 0, null, 'down')]]]));
  t.same(h.members('a'), ['n1', 'n2']);
  t.same(
    h.columns('a', 'rps'),
    [
      [1, 2],
      [5, 6],
      [3, null],
    ],
    'a dead member is a gap, not a zero',
  );
  t.same(h.columns('a', 'p99'), [
    [1, 2],
    [2, 3],
    [4, null],
  ]);
});

t.test('a sample the collector missed (null rate) is a gap, not a zero; a slow member is still charted', async (t) => {
  const h = new MetricHistory();
  h.add(overview(1000, [['a', [member('n1', 5, 2)]]]));
  h.add(overview(2000, [['a', [member('n1', null, null)]]]));
  h.add(overview(3000, [['a', [member('n1', 7, 9, 'slow')]]]));
  t.same(h.columns('a', 'rps'), [
    [1, 2, 3],
    [5, null, 7],
  ]);
  t.same(h.columns('a', 'p99'), [
    [1, 2, 3],
    [2, null, 9],
  ]);
});

t.test('a member first seen later has gaps before; a missing one gets a gap', async (t) => {
  const h = new MetricHistory();
  h.add(overview(1000, [['a', [member('n1', 1, 1)]]]));
  h.add(overview(2000, [['a', [member('n1', 2, 1), member('n2', 7, 1)]]]));
  h.add(overview(3000, [['a', [member('n2', 8, 1)]]]));
  t.same(h.columns('a', 'rps'), [
    [1, 2, 3],
    [1, 2, null],
    [null, 7, 8],
  ]);
});

t.test('a repeated or older push is not a new sample', async (t) => {
  const h = new MetricHistory();
  h.add(overview(2000, [['a', [member('n1', 1, 1)]]]));
  h.add(overview(2000, [['a', [member('n1', 9, 1)]]]));
  h.add(overview(1500, [['a', [member('n1', 9, 1)]]]));
  t.same(h.columns('a', 'rps'), [[2], [1]]);
});

t.test('only the last five minutes are kept, and gone clusters are forgotten', async (t) => {
  const h = new MetricHistory();
  for (let at = 0; at <= WINDOW_MS + 10_000; at += 1000)
    h.add(
      overview(at, [
        ['a', [member('n1', at / 1000, 1)]],
        ['b', [member('n1', 0, 1)]],
      ]),
    );
  const [times, rps] = h.columns('a', 'rps');
  t.equal(times[0], 10, 'the oldest sample is five minutes before the newest');
  t.equal(times.length, WINDOW_MS / 1000 + 1);
  t.equal(rps!.length, times.length, 'columns stay aligned');
  h.add(overview(WINDOW_MS + 11_000, [['a', [member('n1', 1, 1)]]]));
  t.same(h.columns('b', 'rps'), [[]], 'cluster b is gone');
  t.same(h.members('b'), []);
});
