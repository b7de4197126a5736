import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runManyGroupsExample } from '../examples/many-groups.js';
import { freePorts } from '@raftkit/testkit';

t.setTimeout(120_000);
const root = new URL('../../', import.meta.url);

t.test(
  'the README many-groups example runs: 4 hosts over TCP and LevelDB, 12 groups of its own state machine',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'many-groups-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const result = await runManyGroupsExample({ ports: await freePorts(4), dataDir: dir });
    t.equal(result.left, 6, 'the proposal went through a member of the group');
    t.equal(result.read, 6, 'a linearizable read on another member sees it');
    t.equal(result.replicas.length, 4, 'four hosts');
    t.equal(
      result.replicas.reduce((a, b) => a + b, 0),
      11 * 3,
      'after the drop, 11 groups of 3 replicas remain',
    );
    t.ok(
      Math.max(...result.replicas) - Math.min(...result.replicas) <= 1,
      `replicas spread ${result.replicas.join(' ')}`,
    );
    const leaders = Object.values(result.leaders);
    t.ok(Math.max(...leaders) - Math.min(...leaders) <= 2, `leaders spread ${JSON.stringify(result.leaders)}`);
  },
);

t.test('the README shows exactly the many-groups example that runs', async (t) => {
  const readme = readFileSync(new URL('README.md', root), 'utf8');
  const example = readFileSync(new URL('examples/many-groups.ts', root), 'utf8');
  const block = /```ts many-groups\n([\s\S]*?)```/.exec(readme);
  t.ok(block, 'README has the many-groups block');
  t.equal(block?.[1], example);
});
