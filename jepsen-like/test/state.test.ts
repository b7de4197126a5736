import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';

process.env.JEPSEN_LIKE_STATE_DIR = mkdtempSync(join(tmpdir(), 'jl-state-'));
const { claimSlot, releaseSlot, liveSlots, StateFile, readRunStates } = await import('../src/state.js');

t.test('namespace slots: claimed once, stale claims taken over, released', async (t) => {
  const a = claimSlot();
  const b = claimSlot();
  t.not(a, b, 'two claims, two slots');
  t.throws(() => claimSlot(a), /in use/, 'a slot held by a live harness (this one) cannot be claimed again');
  writeFileSync(join(process.env.JEPSEN_LIKE_STATE_DIR!, 'slot-77'), '999999999');
  t.equal(claimSlot(77), 77, "a dead harness's claim is taken over");
  releaseSlot(a);
  releaseSlot(b);
  releaseSlot(77);
  t.same(
    readdirSync(process.env.JEPSEN_LIKE_STATE_DIR!).filter((f) => f.startsWith('slot-')),
    [],
  );
  t.same([...liveSlots()], []);
});

t.test('run state files round trip', async (t) => {
  const file = new StateFile({
    runId: 'r1',
    harnessPid: process.pid,
    startedAt: 'now',
    mode: 'proxy',
    outDir: '/tmp/x',
    slot: null,
    namespaces: [],
    links: [],
    members: { n1: 123 },
    helpers: [],
  });
  file.state.members.n2 = 456;
  file.save();
  t.same(
    readRunStates().map((r) => r.state.members),
    [{ n1: 123, n2: 456 }],
  );
  file.remove();
  t.same(readRunStates(), []);
});
