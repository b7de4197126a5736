import t from 'tap';
import { makeGrudge, Rng, type Link } from '../src/index.js';
import { dropRules, nftScript } from '../src/net/namespaces.js';

const ids = ['n1', 'n2', 'n3', 'n4', 'n5'];
const cut = (links: readonly Link[], a: string, b: string): boolean => links.includes(`${a}>${b}`);
const sees = (links: readonly Link[], a: string): string[] =>
  ids.filter((b) => b === a || (!cut(links, a, b) && !cut(links, b, a)));

t.test('halves: a minority and a majority, cut both ways', async (t) => {
  for (let seed = 0; seed < 20; seed++) {
    const g = makeGrudge('halves', ids, 'n1', new Rng(seed));
    const sizes = ids.map((id) => sees(g.links, id).length).sort();
    t.same(sizes, [2, 2, 3, 3, 3]);
    for (const l of g.links) t.ok(g.links.includes(l.split('>').reverse().join('>') as Link), 'symmetric');
  }
});

t.test('isolate-leader: the leader alone', async (t) => {
  const g = makeGrudge('isolate-leader', ids, 'n3', new Rng(1));
  t.same(sees(g.links, 'n3'), ['n3']);
  t.same(sees(g.links, 'n1'), ['n1', 'n2', 'n4', 'n5']);
  t.equal(g.links.length, 8);
});

t.test('majority-ring: every member sees a majority, no two the same', async (t) => {
  for (let seed = 0; seed < 20; seed++) {
    const g = makeGrudge('majority-ring', ids, null, new Rng(seed));
    const views = ids.map((id) => sees(g.links, id).join(','));
    for (const v of views) t.equal(v.split(',').length, 3, 'a majority of 5');
    t.equal(new Set(views).size, 5, 'all different');
  }
  const seven = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
  const g7 = makeGrudge('majority-ring', seven, null, new Rng(3));
  for (const id of seven) {
    const visible = seven.filter(
      (b) => b === id || (!g7.links.includes(`${id}>${b}`) && !g7.links.includes(`${b}>${id}`)),
    );
    t.ok(visible.length >= 4, 'seven members: each sees at least 4');
  }
});

t.test('bridge: two halves joined by one member', async (t) => {
  const g = makeGrudge('bridge', ids, null, new Rng(7));
  const views = ids.map((id) => sees(g.links, id));
  const bridge = ids.find((_, i) => views[i]!.length === 5);
  t.ok(bridge, 'one member sees everyone');
  t.same(
    ids.filter((id) => id !== bridge).map((id) => sees(g.links, id).length),
    [3, 3, 3, 3],
  );
});

t.test('one-way: one direction only', async (t) => {
  for (let seed = 0; seed < 20; seed++) {
    const g = makeGrudge('one-way', ids, 'n2', new Rng(seed));
    t.equal(g.links.length, 4);
    for (const l of g.links)
      t.notOk(g.links.includes(l.split('>').reverse().join('>') as Link), 'never both directions');
  }
});

t.test('nftables rules: a cut link drops that TCP direction in both namespaces', async (t) => {
  const ip = (id: string): string => `10.77.1.${10 + Number(id.slice(1))}`;
  const rules = dropRules(['n1>n2'], ip, 7000);
  t.same(rules.get('n2'), ['ip saddr 10.77.1.11 tcp dport 7000 drop']);
  t.same(rules.get('n1'), ['ip saddr 10.77.1.12 tcp sport 7000 drop']);
  const script = nftScript(rules.get('n2')!);
  t.match(script, /table inet jepsen \{/);
  t.match(
    script,
    /flush chain inet jepsen input\nadd rule inet jepsen input ip saddr 10\.77\.1\.11 tcp dport 7000 drop/,
  );
  t.notMatch(nftScript([]), /add rule/, 'healed: an empty chain');
});
