import { readFileSync } from 'node:fs';
import t from 'tap';
import { runExample } from '../examples/embed.js';
import { freePorts } from '@raftkit/testkit';

const root = new URL('../../', import.meta.url);

t.test('the README embedding example runs: three members over TCP and LevelDB', async (t) => {
  const result = await runExample(await freePorts(3));
  t.equal(result.size, 2);
  t.same(result.items.sort(), ['apple', 'pear']);
});

t.test('the README shows exactly the example that runs', async (t) => {
  const readme = readFileSync(new URL('README.md', root), 'utf8');
  const example = readFileSync(new URL('examples/embed.ts', root), 'utf8');
  const block = /```ts example\n([\s\S]*?)```/.exec(readme);
  t.ok(block, 'README has an example block');
  t.equal(block?.[1], example);
});
