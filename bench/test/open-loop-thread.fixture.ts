/** A generator thread for load.test.ts: its operation waits a millisecond; every fifth one fails. */
import { parentPort } from 'node:worker_threads';
import { OpError, runOpenLoopShare, type OpenLoopShare } from '../src/load.js';

let calls = 0;
parentPort!.once('message', (m: { share: OpenLoopShare }) => {
  void runOpenLoopShare(
    m.share,
    async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 1));
      if (calls % 5 === 0) throw new OpError('fifth');
    },
    () => ({ calls }),
  ).then((result) => parentPort!.postMessage({ type: 'done', result }));
});
parentPort!.postMessage({ type: 'ready' });
