/**
 * Quick start (README.md shows this file): create a topic, produce idempotently, consume in a consumer group and
 * commit. Run against a cluster: LOG_ENDPOINTS=http://127.0.0.1:7901 LOG_TOKEN=$(cat data/log/token) node dist/examples/quickstart.js
 */
import { fileURLToPath } from 'node:url';
import { LogClient } from '../src/index.js';

export async function quickstart(endpoints: string[], token: string): Promise<string[]> {
  const log = new LogClient({ endpoints, token });
  try {
    await log.createTopic('orders', { partitions: 3 }); // creating it again with the same settings is fine
    const producer = log.producer('orders'); // idempotent: a retried batch is stored once
    for (const id of ['a1', 'b2', 'c3', 'a1']) await producer.send(JSON.stringify({ id }), { key: id }); // the key picks the partition
    const consumer = log.consumer('orders', 'billing'); // starts after the group's committed offsets
    const seen: string[] = [];
    while (seen.length < 4) {
      for (const r of await consumer.poll()) seen.push(`partition ${r.partition} offset ${r.offset}: ${r.value}`);
    }
    await consumer.commit(); // after processing: a crash before this re-delivers, never skips
    return seen;
  } finally {
    await log.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const seen = await quickstart((process.env.LOG_ENDPOINTS ?? 'http://127.0.0.1:7901').split(','), process.env.LOG_TOKEN ?? '');
  console.log(seen.join('\n'));
}
