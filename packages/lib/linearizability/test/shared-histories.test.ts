import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import {
  casRegisterModel,
  checkEvents,
  describeResult,
  kvModel,
  parseJepsenEtcdLog,
  parsePorcupineKvLog,
  type EtcdValue,
} from '../src/index.js';
import { listKvHistories, readJepsenExpectations, requirePorcupineHistories } from './support/shared-data.js';

/**
 * Every history in the shared Porcupine data set must get its known verdict.
 * A generous wall-clock budget turns a pathological slowdown into a clear
 * 'unknown' failure instead of a hung test run; histories slower than
 * SLOW_MS are reported by name.
 */
const dir = requirePorcupineHistories();
const BUDGET_MS = 60_000;
const SLOW_MS = 1_000;
const etcdModel = casRegisterModel<EtcdValue>(null);

t.test('jepsen etcd histories (102 with known verdicts)', async (t) => {
  const expectations = readJepsenExpectations(dir);
  t.equal(expectations.length, 102, 'EXPECTED.txt lists 102 verdicts');
  const timings: { file: string; ms: number }[] = [];
  for (const { file, linearizable } of expectations) {
    const events = parseJepsenEtcdLog(readFileSync(join(dir, 'jepsen', file), 'utf8'));
    const started = performance.now();
    const result = checkEvents(etcdModel, events, { timeoutMs: BUDGET_MS });
    timings.push({ file, ms: performance.now() - started });
    const verdictOk = t.equal(result.result, linearizable ? 'ok' : 'illegal', file);
    if (!verdictOk) t.comment(describeResult(etcdModel, result));
  }
  reportTimings(t, timings);
});

t.test('porcupine kv histories (cNN-ok linearizable, cNN-bad not)', async (t) => {
  const histories = listKvHistories(dir);
  t.equal(histories.length, 6, 'c01, c10 and c50, ok and bad');
  const timings: { file: string; ms: number }[] = [];
  for (const { file, linearizable } of histories) {
    const events = parsePorcupineKvLog(readFileSync(join(dir, 'kv', file), 'utf8'));
    const started = performance.now();
    const result = checkEvents(kvModel, events, { timeoutMs: BUDGET_MS });
    timings.push({ file, ms: performance.now() - started });
    t.equal(result.result, linearizable ? 'ok' : 'illegal', file);
    const keys = new Set(events.flatMap((event) => (event.type === 'invoke' ? [event.input.key] : [])));
    t.equal(result.partitions.length, keys.size, `${file}: one partition per key`);
    if (!linearizable) {
      const illegal = result.partitions.filter((partition) => partition.result === 'illegal');
      t.ok(
        illegal.length > 0 && illegal.every((partition) => partition.blockedOperation !== undefined),
        `${file}: illegal partitions say which operation could not be linearized`,
      );
    }
  }
  reportTimings(t, timings);
});

function reportTimings(t: Test, timings: readonly { file: string; ms: number }[]): void {
  const total = timings.reduce((sum, { ms }) => sum + ms, 0);
  const slow = timings.filter(({ ms }) => ms >= SLOW_MS).sort((a, b) => b.ms - a.ms);
  t.comment(`checked ${timings.length} histories in ${total.toFixed(0)} ms`);
  for (const { file, ms } of slow) t.comment(`slow: ${file} took ${ms.toFixed(0)} ms`);
}
