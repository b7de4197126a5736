/** combineServices: each group name goes to the first kind that claims it; every part's routes and workers are kept. */
import t from 'tap';
import type { ManagedGroupOptions } from '@raftkit/raft';
import { groupOptionsOf, oneGroupKind } from '../src/group-kinds.js';
import { combineServices, type ServiceContext, type ServiceDefinition } from '../src/service.js';
import type { WorkerRole } from '../src/worker.js';

function part(
  prefix: string,
  options: ManagedGroupOptions,
  calls: string[],
  workers: readonly WorkerRole[] = [],
): ServiceDefinition {
  return {
    name: prefix,
    kinds: [
      {
        name: prefix,
        provisioning: 'on request',
        includes: (name) => name.startsWith(`${prefix}.`),
        groupOptions: () => options,
        replicas: 3,
      },
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
  const combined = combineServices('feed', [
    part('log', logOptions, calls),
    part('feed', feedOptions, calls, [worker]),
  ]);
  t.equal(combined.name, 'feed');
  t.equal(groupOptionsOf(combined.kinds, 'log.posts.0'), logOptions);
  t.equal(groupOptionsOf(combined.kinds, 'feed.store.3'), feedOptions);
  t.equal(groupOptionsOf(combined.kinds, 'auction.1'), null, 'a name no part claims is ignored');
  combined.routes({} as ServiceContext);
  t.same(calls, ['log', 'feed']);
  t.same(combined.workers, [worker]);
  t.equal(combineServices('x', [part('log', logOptions, calls)]).workers, undefined, 'no workers: none declared');
});

t.test("a 'one group' kind is its service's only kind; on-request kinds have none", async (t) => {
  const one = {
    name: 'kv',
    provisioning: 'one group',
    createMachine: () => null as never,
    replicas: 'every member',
  } as const;
  const options = { tag: 'log' } as unknown as ManagedGroupOptions;
  t.equal(oneGroupKind([one]), one);
  t.equal(oneGroupKind(part('log', options, []).kinds), null);
  t.throws(() => oneGroupKind([one, ...part('log', options, []).kinds]), TypeError, 'mixing the two is refused');
  t.equal(groupOptionsOf([one], 'kv'), null, 'a one-group kind is never a managed group');
});

t.test("the member process takes every part's node flags, each once", async (t) => {
  const calls: string[] = [];
  const options = {} as unknown as ManagedGroupOptions;
  const log = { ...part('log', options, calls), memberNodeFlags: ['--single-threaded-gc', '--max-semi-space-size=8'] };
  const feed = { ...part('feed', options, calls), memberNodeFlags: ['--single-threaded-gc'] };
  t.same(combineServices('feed', [log, feed]).memberNodeFlags, ['--single-threaded-gc', '--max-semi-space-size=8']);
  t.equal(combineServices('feed', [part('a', options, calls)]).memberNodeFlags, undefined, 'none when no part has any');
});
