import { readFileSync } from 'node:fs';
import t from 'tap';
import { runMembershipExample } from '../examples/membership.js';

const root = new URL('../../', import.meta.url);

t.test(
  'the README membership walkthrough runs: a group in one process grows, changes leader and shrinks',
  async (t) => {
    const result = await runMembershipExample();
    t.equal(result.total, 10, 'the counter reached 10 through the new member set');
    t.same([...result.voters].sort(), ['b', 'c', 'd'], 'a retired, d joined as a voter');
    t.equal(result.leader, 'd', 'd leads after the transfer');
    t.ok(
      result.leaders.length >= 2 && result.leaders.at(-1) === 'd',
      `leadership observed as it moved: ${result.leaders.join(' -> ')}`,
    );
  },
);

t.test('the README shows exactly the membership example that runs', async (t) => {
  const readme = readFileSync(new URL('README.md', root), 'utf8');
  const example = readFileSync(new URL('examples/membership.ts', root), 'utf8');
  const block = /```ts membership\n([\s\S]*?)```/.exec(readme);
  t.ok(block, 'README has the membership block');
  t.equal(block?.[1], example);
});
