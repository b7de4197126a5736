/** Child process for the crash test: appends numbered records until killed, printing each acknowledged offset. */
import { StreamLog } from '../../src/index.js';

const log = await StreamLog.open({ dir: process.argv[2]!, segmentBytes: 64 * 1024 });
let next = log.endOffset;
for (;;) {
  const batch = Array.from({ length: 50 }, (_, i) => Buffer.from(String(next + i)));
  next += batch.length;
  const first = await log.append(batch);
  process.stdout.write(`${first + batch.length - 1}\n`);
}
