import t from 'tap';
import { performance } from 'node:perf_hooks';
import { Doc } from '../src/index.js';
import { loadTraces, replayTrace } from './support.js';

/**
 * Every trace in ../shared/data/editing-traces replayed as local edits gives exactly its endContent; the encoded
 * document decodes (a fresh replica applying the whole log as remote ops) to the same text. Times are reported,
 * never asserted (the machine is shared).
 */
const traces = loadTraces();

t.test('the shared data holds the traces', async (t) => {
  t.ok(traces.length >= 3, `${traces.length} traces: ${traces.map((x) => x.name).join(', ')}`);
});

for (const { name, trace } of traces) {
  t.test(name, async (t) => {
    const patches = trace.txns.reduce((n, x) => n + x.patches.length, 0);
    let t0 = performance.now();
    const doc = replayTrace(trace);
    const replayMs = performance.now() - t0;
    t.equal(doc.text().length, trace.endContent.length, 'length');
    t.ok(doc.text() === trace.endContent, 'text equals endContent');
    t0 = performance.now();
    const bytes = doc.encode();
    const encodeMs = performance.now() - t0;
    t0 = performance.now();
    const back = Doc.decode(bytes, 'reader');
    const decodeMs = performance.now() - t0;
    t.ok(back.text() === trace.endContent, 'decoded text equals endContent');
    t.same(back.stateVector(), doc.stateVector(), 'decoded state vector');
    {
      // Every op of the log delivered in reverse: all wait, then apply in one go.
      const ops = doc.opsSince();
      t0 = performance.now();
      const rev = new Doc('reverse');
      rev.apply([...ops].reverse());
      t.ok(rev.text() === trace.endContent, `${ops.length} ops delivered in reverse order give endContent`);
      t.comment(`${name}: ${ops.length} ops applied in reverse order in ${(performance.now() - t0).toFixed(0)} ms`);
    }
    if (name === 'friendsforever_flat') {
      // The same with chunks of 3 runs: thousands of chunk splits, the cursor cache invalidated all the time.
      t.ok(replayTrace(trace, 'tiny', 3).text() === trace.endContent, 'text with tiny chunks');
    }
    t.comment(
      `${name}: ${patches} patches replayed in ${replayMs.toFixed(0)} ms, ${doc.runCount} runs, ` +
        `encoded ${bytes.length} bytes (${trace.endContent.length} chars of text) in ${encodeMs.toFixed(0)} ms, decoded in ${decodeMs.toFixed(0)} ms`,
    );
  });
}
