/**
 * Heap and snapshot bytes per link of the link store machine, live and after the purge:
 * `node --expose-gc packages/services/shortlink/dist/test/load/link-memory.js [links]`.
 */
import { codeForId } from '../../src/codes.js';
import { LinkMachine } from '../../src/machine.js';

const collect = (globalThis as { gc?: () => void }).gc;
if (collect === undefined) throw new Error('run with node --expose-gc');
const heap = (): number => {
  for (let i = 0; i < 3; i++) collect();
  return process.memoryUsage().heapUsed;
};

const DAY = 24 * 60 * 60 * 1000;
const n = Number(process.argv[2] ?? 200_000);
const url = (i: number) => `https://example.com/some/path/to/a/page?id=${String(i).padStart(10, '0')}`;
const alias = (i: number) => `alias-${String(i).padStart(10, '0')}`;
const m = new LinkMachine();
let index = 0;
const at = (time: number) => ({ index: ++index, term: 1, time });

for (let i = 0; i * 1000 < n; i++) m.apply({ op: 'lease', server: 'a' }, at(0));
const empty = heap();
for (let i = 0; i < n; i++)
  m.apply(
    {
      op: 'create',
      code: codeForId(i)!,
      long_url: url(i),
      created_at: 1,
      expires_at: DAY,
      created_by: 'user12',
      alias: false,
    },
    at(0),
  );
const generated = heap();
for (let i = 0; i < n; i++)
  m.apply(
    {
      op: 'create',
      code: alias(i),
      long_url: url(i),
      created_at: 1,
      expires_at: DAY,
      created_by: 'user12',
      alias: true,
    },
    at(0),
  );
const full = heap();
console.log(
  `${n} generated and ${n} alias links, ${url(0).length}-character URLs, ${alias(0).length}-character aliases`,
);
console.log(
  `live: ${((generated - empty) / n).toFixed(0)} B heap per generated link, ${((full - generated) / n).toFixed(0)} B per alias link, ${(m.snapshot().byteLength / (2 * n)).toFixed(0)} B snapshot per link`,
);

const purge = (codeOf: (i: number) => string): void => {
  for (let i = 0; i < n; i += 1000)
    m.apply(
      { op: 'purge', before: 2 * DAY, codes: Array.from({ length: Math.min(1000, n - i) }, (_, k) => codeOf(i + k)) },
      at(3 * DAY),
    );
};
purge((i) => codeForId(i)!);
purge(alias);
const purged = heap();
console.log(
  `purged all: ${m.size} links left, ${m.retiredCount} aliases retired; ${((purged - empty) / n).toFixed(0)} B heap and ${(m.snapshot().byteLength / n).toFixed(0)} B snapshot per purged alias, generated links leave nothing`,
);
