/**
 * Recovery after losing a quorum (forceNewCluster), on real LevelDB: two of three members are gone for good, the
 * survivor cannot commit; restarted with forceNewCluster it serves alone with every write it had committed, new
 * members join it, and the forced configuration can never be proposed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { applyChange, ConfigChangeError } from '../src/core.js';
import { RaftNode, TimeoutError } from '../src/node.js';
import { LevelStorage } from '../src/storage/leveldb.js';
import { LocalNetwork } from '../src/transport/local.js';
import { Counter } from './helpers/machines.js';

const dir = mkdtempSync(join(tmpdir(), 'force-new-cluster-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test(
  'a lone survivor restarted with forceNewCluster serves alone with its committed writes, then grows again',
  async (t) => {
    const network = new LocalNetwork();
    const founders = { a: 'a', b: 'b', c: 'c' };
    const warnings: string[] = [];
    const start = (
      id: string,
      extra: { bootstrap?: Record<string, string>; peers?: Record<string, string>; forceNewCluster?: boolean },
    ) =>
      RaftNode.start<number, number, Counter>({
        id,
        tickMs: 10,
        snapshotEvery: 4, // so the survivor's state is partly in a snapshot, partly in the log
        stateMachine: new Counter(),
        storage: new LevelStorage(join(dir, id)),
        transport: network.transport(id),
        requestTimeoutMs: 2_000,
        logger: {
          log: (level, message) => {
            if (level === 'warn') warnings.push(message);
          },
        },
        ...extra,
      });
    const [a, b, c] = await Promise.all(Object.keys(founders).map((id) => start(id, { bootstrap: founders })));
    for (let n = 1; n <= 10; n++) await c!.propose(n);
    await a!.readBarrier();
    t.equal(
      a!.readLocal((m) => m.total),
      55,
      'the survivor has applied all ten writes',
    );

    // b and c are lost for good (their disks are gone). Alone, a cannot commit anything.
    await Promise.all([b!.stop(), c!.stop()]);
    const stuck = await a!.propose(100, { timeoutMs: 500 }).catch((e: unknown) => e);
    t.ok(stuck instanceof TimeoutError, 'without a quorum a write cannot commit');
    await a!.stop();

    const alone = await start('a', { bootstrap: founders, forceNewCluster: true });
    t.ok(
      warnings.some((w) => w.includes('forced a new cluster')),
      'the forced start says so',
    );
    const total = await alone.propose(1_000);
    t.ok(
      total === 1_055 || total === 1_155,
      `every committed write is there (the unacknowledged 100 may or may not be): ${total}`,
    );
    t.same(alone.status().config.voters, ['a'], 'the survivor is the only voter');

    // The group grows again: a new member with empty storage joins and catches up.
    const d = await start('d', { bootstrap: {}, peers: { a: 'a' } });
    await alone.addVoter('d', 'd');
    await d.readBarrier();
    t.equal(
      d.readLocal((m) => m.total),
      total,
      'the new member has the whole state',
    );
    t.equal(await d.propose(1), total + 1, 'and the pair commits');

    // Restarted without the flag, a keeps its new configuration; the forced change can never be proposed.
    await alone.stop();
    const again = await start('a', { bootstrap: founders });
    t.same(
      again.status().config.voters.sort(),
      ['a', 'd'],
      'restarted without the flag, the configuration is the grown one',
    );
    const refused = await again.changeMembership({ type: 'forceNewCluster', node: 'a' }).catch((e: unknown) => e);
    t.ok(refused instanceof ConfigChangeError, `a forced configuration cannot be proposed: ${String(refused)}`);
    t.throws(
      () => applyChange({ voters: ['a', 'd'], learners: [] }, { type: 'forceNewCluster', node: 'a' }),
      ConfigChangeError,
      'nor applied by a leader',
    );
    await Promise.all([again.stop(), d.stop()]);
  },
);
