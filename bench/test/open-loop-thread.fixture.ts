/**
 * A generator thread for load.test.ts: its operation waits a millisecond and answers its number; every fifth one
 * fails, and the answer check refuses the answers two after a multiple of five (failures of another kind).
 */
import { parentPort } from 'node:worker_threads';
import { OpError, runOpenLoopShare, type OpenLoopShare } from '../src/load.js';

let calls = 0;
parentPort!.once('message', (m: { share: OpenLoopShare }) => {
  void runOpenLoopShare(
    m.share,
    async () => {
      const n = ++calls;
      await new Promise((r) => setTimeout(r, 1));
      if (n % 5 === 0) throw new OpError('fifth');
      return n;
    },
    () => ({ calls }),
    (n) => {
      if (n % 5 === 2) throw new OpError('refused answer');
    },
  ).then((result) => parentPort!.postMessage({ type: 'done', result }));
});
parentPort!.postMessage({ type: 'ready' });
