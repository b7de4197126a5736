/**
 * A GroupHost's own address is the one `hosts` names for it when it does (what the others dial: a proxy's, a NAT's,
 * another namespace's address), not its listener's; only without an entry is it the bound listener (port 0).
 * Before, the listener's address won, so a ManagedHost recorded it in the meta group and every process then dialled
 * its peers there (under jepsen-like's packet proxies, 127.0.0.1:7001 in each namespace: itself), and no group of
 * the event log could keep a leader.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GroupHost } from '../src/groups/host.js';
import { freePorts } from '@raftkit/testkit';

const dir = mkdtempSync(join(tmpdir(), 'group-host-address-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test("the address hosts names for this host wins over the listener's", async (t) => {
  const [listen, advertised] = await freePorts(2);
  const host = await GroupHost.open({
    id: 'h1',
    listen: { host: '127.0.0.1', port: listen! },
    secret: randomBytes(32),
    dataDir: join(dir, 'a'),
    hosts: { h1: `127.0.0.2:${advertised}`, h2: '127.0.0.1:1' },
  });
  t.teardown(() => host.close());
  t.equal(host.hostAddress('h1'), `127.0.0.2:${advertised}`);
  t.equal(host.address().port, listen, 'it still listens where it was told');
});

t.test('without an entry, the bound listener', async (t) => {
  const host = await GroupHost.open({
    id: 'h1',
    listen: { host: '127.0.0.1', port: 0 },
    secret: randomBytes(32),
    dataDir: join(dir, 'b'),
    hosts: { h2: '127.0.0.1:1' },
  });
  t.teardown(() => host.close());
  t.equal(host.hostAddress('h1'), `127.0.0.1:${host.address().port}`);
  t.not(host.address().port, 0);
});
