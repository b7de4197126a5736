/**
 * Every simulator run that once found a bug, kept as its full configuration (test/regressions/*.json, so the
 * cases survive changes to how seeds map to configurations). Each failed before its fix and must keep passing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import type { SimConfig } from '../sim/config.js';
import { loadHistoryChecker } from '../sim/linearizability.js';
import { runSimulation } from '../sim/simulation.js';

const dir = new URL('../../test/regressions/', import.meta.url);

t.test('regression runs', async (t) => {
  const checker = await loadHistoryChecker();
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  t.ok(files.length >= 4, 'the regression cases are there');
  for (const file of files) {
    const { bug, configs } = JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as {
      bug: string;
      configs: SimConfig[];
    };
    for (const config of configs) {
      const r = runSimulation(config, { checkHistory: checker });
      t.ok(r.ok, `${file} seed ${config.seed}: ${bug}`) ||
        t.comment(`broke ${r.failure?.invariant}: ${r.failure?.message}`);
    }
  }
});
