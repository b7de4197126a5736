/** combineGroupedServices: each group name goes to the first kind that claims it; every part's routes and workers are kept. */
import t from 'tap';
import type { ManagedGroupOptions } from '@raftkit/raft';
import {
  combineGroupedServices,
  groupOptionsOf,
  type GroupedServiceContext,
  type GroupedServiceDefinition,
} from '../src/grouped-service.js';
import type { WorkerRole } from '../src/worker.js';

function part(
  prefix: string,
  options: ManagedGroupOptions,
  calls: string[],
  workers: readonly WorkerRole[] = [],
): GroupedServiceDefinition {
  return {
    name: prefix,
    kinds: [
      { name: prefix, includes: (name) => name.startsWith(`${prefix}.`), groupOptions: () => options, replicas: 3 },
    ],
    routes: () => void calls.push(prefix),
    ...(workers.length > 0 ? { workers } : {}),
  };
}

t.test('group names go to the part that claims them, routes of every part are registered in order', async (t) => {
  const calls: string[] = [];
  const logOptions = { tag: 'log' } as unknown as ManagedGroupOptions;
  const feedOptions = { tag: 'feed' } as unknown as ManagedGroupOptions;
  const worker = { name: 'fanout' } as unknown as WorkerRole;
  const combined = combineGroupedServices('feed', [
    part('log', logOptions, calls),
    part('feed', feedOptions, calls, [worker]),
  ]);
  t.equal(combined.name, 'feed');
  t.equal(groupOptionsOf(combined.kinds, 'log.posts.0'), logOptions);
  t.equal(groupOptionsOf(combined.kinds, 'feed.store.3'), feedOptions);
  t.equal(groupOptionsOf(combined.kinds, 'auction.1'), null, 'a name no part claims is ignored');
  combined.routes({} as GroupedServiceContext);
  t.same(calls, ['log', 'feed']);
  t.same(combined.workers, [worker]);
  t.equal(
    combineGroupedServices('x', [part('log', logOptions, calls)]).workers,
    undefined,
    'no workers: none declared',
  );
});
