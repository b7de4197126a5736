/**
 * The editor on real processes: `cluster up --service collab` (5 op-log members, 3 workers), one cluster for every
 * case of this file, real sockets and LevelDB. Faults through the cluster CLI (kill -9 a worker, kill the op-log
 * leader). Waits are generous and nothing asserts speed: the machine is shared and slow.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import WebSocket from 'ws';
import { call, startCluster, until } from '@raftkit/testkit';
import { hashSlot } from '@raftkit/http';
import { CollabClient, DEFAULT_GROUPS, groupName, slotsOf } from '../src/index.js';
import { LogAccess } from '../src/workers/editor/log-access.js';
import { appendStats, DocSession, type Conn } from '../src/workers/editor/session.js';

const cluster = await startCluster('collab', {
  settings: { permission_check_ms: '1000', idle_release_ms: '3000', max_editors: '3', max_docs_per_user: '15' },
});
t.teardown(() => cluster.down());
const token = cluster.token;
const workers = cluster.role('worker');
const W = workers.map((w) => w.url);
const clients: CollabClient[] = [];
t.teardown(() => {
  for (const c of clients) c.close();
});

async function userToken(user: string): Promise<string> {
  const r = await call(W[0]!, 'POST', '/api/collab/users', { token, body: { user_id: user } });
  if (r.status !== 200) throw new Error(`user ${user}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.user_token as string;
}

async function newDoc(owner: string, ownerToken: string, template?: string): Promise<string> {
  const r = await call(W[0]!, 'POST', '/api/docs', {
    token: ownerToken,
    body: { title: 'a doc', owner_id: owner, ...(template !== undefined ? { template } : {}) },
    timeoutMs: 60_000,
  });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.doc_id as string;
}

async function connect(worker: number, docId: string, user: string, userTok: string): Promise<CollabClient> {
  const c = await CollabClient.connect({
    url: W[worker]!,
    docId,
    userId: user,
    token: userTok,
    connectTimeoutMs: 60_000,
  });
  clients.push(c);
  return c;
}

/** A GET answered by the first worker that answers (one may have been killed). */
async function get(path: string): Promise<Record<string, unknown>> {
  for (const w of W) {
    const r = await call(w, 'GET', path, { token, timeoutMs: 5_000 }).catch(() => null);
    if (r !== null && r.status === 200) return r.body;
  }
  throw new Error(`no worker answered GET ${path}`);
}

async function serverText(docId: string): Promise<string> {
  const r = { status: 200, body: await get(`/api/docs/${docId}/text`) };
  if (r.status !== 200) throw new Error(`text: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.text as string;
}

/** A raw socket recording every server message, for protocol-level cases. */
class Raw {
  readonly messages: Array<Record<string, unknown>> = [];
  closed: { code: number; reason: string } | null = null;
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => this.messages.push(JSON.parse(d.toString()) as Record<string, unknown>));
    ws.on('close', (code, reason) => (this.closed = { code, reason: reason.toString() }));
  }

  static open(
    worker: number,
    docId: string,
    tok: string | null,
    viaQuery = false,
  ): Promise<Raw | { status: number; body: string }> {
    const base = `${W[worker]!.replace('http', 'ws')}/ws/docs/${docId}`;
    const ws = new WebSocket(
      viaQuery && tok !== null ? `${base}?token=${encodeURIComponent(tok)}` : base,
      !viaQuery && tok !== null ? { headers: { authorization: `Bearer ${tok}` } } : {},
    );
    return new Promise((resolve) => {
      ws.on('open', () => resolve(new Raw(ws)));
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      ws.on('error', () => undefined);
    });
  }

  send(m: unknown): void {
    this.ws.send(typeof m === 'string' ? m : JSON.stringify(m));
  }

  wait(what: string, p: (m: Record<string, unknown>) => boolean, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    return until(what, () => this.messages.find(p) ?? null, timeoutMs, 20);
  }

  waitClosed(timeoutMs = 60_000): Promise<{ code: number; reason: string }> {
    return until('socket closed', () => this.closed, timeoutMs, 20);
  }
}

async function raw(worker: number, docId: string, tok: string, viaQuery = false): Promise<Raw> {
  const r = await Raw.open(worker, docId, tok, viaQuery);
  if (!(r instanceof Raw)) throw new Error(`upgrade refused: ${r.status} ${r.body}`);
  return r;
}

const alice = await userToken('alice');
const bob = await userToken('bob');
const carol = await userToken('carol');
const dave = await userToken('dave');

t.test('users and tokens', async (t) => {
  const again = await call(W[2]!, 'POST', '/api/collab/users', { token, body: { user_id: 'alice' } });
  t.equal(again.body.user_token, alice, 'the same user_id gets the same token, from any worker');
  const byUser = await call(W[0]!, 'POST', '/api/collab/users', { token: alice, body: { user_id: 'eve' } });
  t.equal(byUser.status, 403, 'a user token cannot mint tokens');
  const bad = await call(W[0]!, 'POST', '/api/collab/users', { token, body: { user_id: 'no spaces' } });
  t.equal(bad.status, 400);
  t.equal((bad.body.error as { code: string }).code, 'invalid_field');
  const none = await call(W[0]!, 'GET', '/api/docs', {});
  t.equal(none.status, 401);
  t.ok((none.body.error as { message: string }).message, 'errors are {error:{code,message}}');
  const list = await call(W[0]!, 'GET', '/api/collab/workers', { token: alice });
  t.same(
    (list.body.workers as Array<{ url: string }>).map((w) => w.url),
    W,
    'every worker listed',
  );
});

t.test('documents over HTTP', async (t) => {
  const doc = await newDoc('alice', alice, 'hello template');
  const got = await call(W[2]!, 'GET', `/api/docs/${doc}`, { token: alice });
  t.equal(got.status, 200);
  t.match(got.body, { doc_id: doc, title: 'a doc', owner: 'alice', revision: 1, role: 'editor' });
  t.type(got.body.last_modified, 'number');
  t.equal(await serverText(doc), 'hello template', 'a template is the first change');
  const forOther = await call(W[0]!, 'POST', '/api/docs', { token: alice, body: { title: 'x', owner_id: 'bob' } });
  t.equal(forOther.status, 403, 'a user creates documents for itself only');
  const badBody = await call(W[0]!, 'POST', '/api/docs', { token: alice, raw: '{"title":' });
  t.equal(badBody.status, 400);
  const noTitle = await call(W[0]!, 'POST', '/api/docs', { token: alice, body: { owner_id: 'alice' } });
  t.equal(noTitle.status, 400);
  t.equal((noTitle.body.error as { field: string }).field, 'title');
  const hugeTemplate = await call(W[0]!, 'POST', '/api/docs', {
    token: alice,
    body: { title: 'x', owner_id: 'alice', template: 'x'.repeat(100_001) },
  });
  t.equal(hugeTemplate.status, 400, 'a template over 100K characters is refused');
  t.equal((await call(W[0]!, 'GET', '/api/docs/nope', { token: alice })).status, 404);
  t.equal((await call(W[0]!, 'GET', '/api/docs/bad!id', { token: alice })).status, 400);
  t.equal(
    (await call(W[0]!, 'GET', `/api/docs/${doc}`, { token: bob })).status,
    404,
    'no access looks like no document',
  );
  const listed = await call(W[1]!, 'GET', '/api/docs', { token: alice });
  t.ok(
    (listed.body.docs as Array<{ doc_id: string }>).some((d) => d.doc_id === doc),
    'listing: the owner sees it',
  );
  const bobs = await call(W[1]!, 'GET', '/api/docs', { token: bob });
  t.notOk(
    (bobs.body.docs as Array<{ doc_id: string }>).some((d) => d.doc_id === doc),
    'listing: others do not',
  );
  // Sharing
  const share = await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, {
    token: alice,
    body: { role: 'viewer' },
  });
  t.equal(share.status, 200);
  t.equal(
    (await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: bob, body: { role: 'editor' } })).status,
    403,
    'only the owner shares',
  );
  t.equal(
    (await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: alice, body: { role: 'admin' } })).status,
    400,
  );
  t.equal((await call(W[0]!, 'GET', `/api/docs/${doc}`, { token: bob })).body.role, 'viewer');
  t.equal(
    (await call(W[0]!, 'POST', `/api/docs/${doc}/snapshots`, { token: bob, body: { name: 'v' } })).status,
    403,
    'a viewer saves no versions',
  );
  const perms = await call(W[2]!, 'GET', `/api/docs/${doc}/permissions`, { token: alice });
  t.same(perms.body.permissions, [
    { user_id: 'alice', role: 'editor' },
    { user_id: 'bob', role: 'viewer' },
  ]);
});

t.test('WebSocket upgrade, join and errors', async (t) => {
  const doc = await newDoc('alice', alice);
  const noToken = await Raw.open(0, doc, null);
  t.match(noToken, { status: 401 }, 'no token: 401');
  const wrong = await Raw.open(0, doc, 'client.alice.wrong');
  t.match(wrong, { status: 401 }, 'wrong token: 401');
  t.match(await Raw.open(0, '%E0%A4%A', alice), { status: 400 }, 'a malformed path: 400');
  t.match(await Raw.open(0, 'bad!id', alice), { status: 400 }, 'a bad doc id: 400');
  t.equal((await call(W[0]!, 'GET', '/healthz')).status, 200, 'the worker is fine');
  const missing = await raw(1, 'nosuchdoc', dave);
  missing.send({ type: 'join', user_id: 'dave' });
  const absent = await missing.waitClosed();
  t.equal(absent.code, 4404, 'no such document: 4404');
  const notJoin = await raw(1, doc, alice);
  notJoin.send({ type: 'op', op_id: 'x', op: [], parent_revision: 0 });
  t.equal((await notJoin.waitClosed()).code, 4400, 'join first');
  const other = await raw(1, doc, alice);
  other.send({ type: 'join', user_id: 'bob' });
  t.equal((await other.waitClosed()).code, 4001, 'join as another user: 4001');
  const stranger = await raw(1, doc, dave);
  stranger.send({ type: 'join', user_id: 'dave' });
  const forbidden = await stranger.waitClosed();
  t.same(forbidden, absent, 'no access: closed exactly as for an absent document (4404), so ids do not leak');
  t.same(stranger.messages, missing.messages, 'and sent the same messages before it');

  // A browser-style connection (token in the query) through every message type.
  const a = await raw(2, doc, alice, true);
  a.send({ type: 'join', user_id: 'alice' });
  const snap = await a.wait('snapshot', (m) => m.type === 'snapshot');
  t.equal(snap.revision, 0);
  t.type(snap.content, 'string');
  await a.wait('live', (m) => m.type === 'status' && m.state === 'live');
  const ops = [{ type: 'insert', id: ['alice~raw', 0], lamport: 0, left: null, right: null, text: 'abc' }];
  a.send({ type: 'op', op_id: 'alice~raw:0', op: ops, parent_revision: 0 });
  const ack = await a.wait('ack', (m) => m.type === 'ack' && m.op_id === 'alice~raw:0');
  t.equal(ack.revision, 1, 'acknowledged at revision 1 once committed');
  a.send({ type: 'op', op_id: 'alice~raw:0', op: ops, parent_revision: 0 });
  await until(
    'the duplicate answered',
    () => a.messages.filter((m) => m.type === 'ack' && m.op_id === 'alice~raw:0').length === 2,
  );
  t.equal(
    a.messages.filter((m) => m.type === 'ack')[1]!.revision,
    1,
    'a duplicate op_id is acknowledged at its first revision',
  );
  t.equal(await serverText(doc), 'abc', 'applied once');
  a.send('not json');
  await a.wait('bad frame', (m) => m.type === 'error' && m.code === 'invalid_message');
  a.send({
    type: 'op',
    op_id: 'bob:0',
    op: [{ type: 'insert', id: ['bob', 0], lamport: 5, left: null, right: null, text: 'x' }],
    parent_revision: 1,
  });
  await a.wait('forged client id', (m) => m.type === 'error' && m.op_id === 'bob:0' && m.code === 'forbidden');
  a.send({
    type: 'op',
    op_id: 'alice~raw:5',
    op: [{ type: 'insert', id: ['alice~raw', 5], lamport: 9, left: null, right: null, text: 'x' }],
    parent_revision: 1,
  });
  await a.wait('gap', (m) => m.type === 'error' && m.op_id === 'alice~raw:5' && m.code === 'invalid_op');
  a.send({
    type: 'op',
    op_id: 'alice~raw:3',
    op: [
      {
        type: 'insert',
        id: ['alice~raw', 3],
        lamport: 3,
        left: ['alice~raw', 2],
        right: null,
        text: 'y'.repeat(100_000),
      },
    ],
    parent_revision: 1,
  });
  await a.wait('too large', (m) => m.type === 'error' && m.op_id === 'alice~raw:3' && m.code === 'too_large');
  a.send({
    type: 'op',
    op_id: 'alice~raw:3',
    op: [{ type: 'insert', id: ['alice~raw', 3], lamport: 3, left: ['nobody', 7], right: null, text: 'z' }],
    parent_revision: 1,
  });
  await a.wait('unknown anchor', (m) => m.type === 'error' && m.op_id === 'alice~raw:3' && m.code === 'invalid_op');
  t.equal(await serverText(doc), 'abc', 'nothing of a refused change applied');

  // Reconnect with since_revision: snapshot, then the ops since.
  const b = await raw(0, doc, alice);
  b.send({ type: 'join', user_id: 'alice', since_revision: 0 });
  const bs = await b.wait('snapshot', (m) => m.type === 'snapshot');
  t.equal(bs.revision, 1);
  const replay = await b.wait('ops since', (m) => m.type === 'op');
  t.match(replay, { op_id: 'alice~raw:0', revision: 1, author: 'alice' });
  t.ok(b.messages.indexOf(bs) < b.messages.indexOf(replay), 'snapshot first');

  // Presence: relayed with a colour, never logged; gone on disconnect.
  b.send({ type: 'presence', cursor_pos: 2, selection: { anchor: 1, head: 2 } });
  const p = await a.wait('presence', (m) => m.type === 'presence' && m.user_id === 'alice' && m.cursor === 2);
  t.match(p, { selection: { anchor: 1, head: 2 } });
  t.match(p.color, /^#[0-9a-f]{6}$/);
  // Throttled: a burst of 20 updates reaches the others as the first and, after ~100 ms, the latest.
  const before = a.messages.filter((m) => m.type === 'presence').length;
  for (let i = 10; i < 30; i++) b.send({ type: 'presence', cursor_pos: i });
  await a.wait('the latest cursor', (m) => m.type === 'presence' && m.cursor === 29);
  await new Promise((r) => setTimeout(r, 300));
  const relayed = a.messages.filter((m) => m.type === 'presence').length - before;
  t.ok(relayed <= 2, `a burst of 20 presence updates relayed as ${relayed} (at most one per 100 ms; the latest wins)`);
  const bad = await raw(0, doc, alice);
  bad.send({ type: 'join', user_id: 'alice' });
  await bad.wait('snapshot', (m) => m.type === 'snapshot');
  bad.send({ type: 'presence', cursor_pos: -1 });
  await bad.wait('bad presence', (m) => m.type === 'error' && m.code === 'invalid_message');
  bad.ws.close();
  t.equal((await call(W[0]!, 'GET', `/api/docs/${doc}`, { token })).body.revision, 1, 'presence is not in the log');
  a.ws.close();
  b.ws.close();
});

t.test('three clients on three workers converge; undo is per user', async (t) => {
  const doc = await newDoc('alice', alice);
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } });
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: alice, body: { role: 'editor' } });
  const a = await connect(0, doc, 'alice', alice);
  const b = await connect(1, doc, 'bob', bob);
  const c = await connect(2, doc, 'carol', carol);
  a.insert(0, 'Hello');
  await a.synced();
  await until('b and c see alice', () => b.text() === 'Hello' && c.text() === 'Hello');
  b.insert(5, ' world');
  c.insert(0, '>> ');
  await Promise.all([b.synced(), c.synced()]);
  await until('all converge', () => a.text() === b.text() && b.text() === c.text() && a.text() === '>> Hello world');
  a.format(3, 5, { bold: true });
  await a.synced();
  await until('bold everywhere', () => JSON.stringify(c.spans()) === JSON.stringify(a.spans()));
  t.same(c.spans()[1], { text: 'Hello', attrs: { bold: true } });
  // Alice's undo removes her bold, then her typing, never Bob's or Carol's text.
  t.ok(a.undo(), 'undo the bold');
  t.ok(a.undo(), 'undo the typing');
  await a.synced();
  await until('undo seen everywhere', () => b.text() === '>>  world' && c.text() === '>>  world');
  t.same(a.spans(), [{ text: '>>  world', attrs: {} }], 'bold gone too');
  t.ok(a.redo(), 'redo the typing');
  await a.synced();
  await until('redo seen', () => c.text() === '>> Hello world');
  t.equal(await serverText(doc), '>> Hello world');
  // Concurrent typing at one place never interleaves.
  a.insert(3, 'AAAA');
  b.insert(3, 'BBBB');
  await Promise.all([a.synced(), b.synced()]);
  await until(
    'converged',
    () =>
      a.text() === b.text() &&
      b.text() === c.text() &&
      (c.text() === '>> AAAABBBBHello world' || c.text() === '>> BBBBAAAAHello world'),
  );
  const meta = await call(W[0]!, 'GET', `/api/docs/${doc}`, { token });
  t.ok(
    W.some((_, i) => meta.body.worker === workers[i]!.id),
    'one worker owns it',
  );
  for (const x of [a, b, c]) x.close();
});

t.test('offline edits merge on reconnect; presence events', async (t) => {
  const doc = await newDoc('alice', alice, 'base');
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } });
  const a = await connect(1, doc, 'alice', alice);
  const b = await connect(2, doc, 'bob', bob);
  const seen: string[] = [];
  b.on('presence', (p) => seen.push(`${p.user_id}:${p.cursor}`));
  a.presence(2);
  await until('bob sees alice cursor', () => seen.includes('alice:2'));
  a.offline();
  t.equal(a.status, 'offline');
  a.insert(4, ' offline');
  a.insert(0, '[');
  b.insert(0, 'online ');
  await b.synced();
  await until('alice is gone for bob', () => seen.includes('alice:null'));
  t.equal(a.pendingCount, 2, 'offline edits wait');
  a.online();
  await a.synced();
  await until('converged', () => a.text() === b.text());
  t.equal(a.text(), await serverText(doc));
  t.match(a.text(), /offline/);
  t.match(a.text(), /online /);
  // Undo survives the reconnect: alice's last change was typing "[".
  t.ok(a.undo());
  await a.synced();
  await until('undo after reconnect', () => !b.text().includes('['));
  a.close();
  b.close();
});

t.test('viewers are read-only; revoking closes the socket; comments; versions', async (t) => {
  const doc = await newDoc('alice', alice, 'version one');
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'viewer' } });
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: alice, body: { role: 'commenter' } });
  const v = await raw(0, doc, bob);
  v.send({ type: 'join', user_id: 'bob' });
  const snap = await v.wait('snapshot', (m) => m.type === 'snapshot');
  t.equal(snap.read_only, true, 'a viewer joins read-only');
  v.send({
    type: 'op',
    op_id: 'bob:0',
    op: [{ type: 'insert', id: ['bob', 0], lamport: 0, left: null, right: null, text: 'x' }],
    parent_revision: 1,
  });
  await v.wait('read_only', (m) => m.type === 'error' && m.code === 'read_only' && m.op_id === 'bob:0');

  // Comments: anchored on characters, commenters may write them.
  const a = await connect(1, doc, 'alice', alice);
  const anchor = a.anchor(8, 3);
  const cm = await call(W[2]!, 'POST', `/api/docs/${doc}/comments`, {
    token: carol,
    body: { ...anchor, body: 'which one?' },
  });
  t.equal(cm.status, 201);
  t.equal(
    (await call(W[2]!, 'POST', `/api/docs/${doc}/comments`, { token: bob, body: { ...anchor, body: 'no' } })).status,
    403,
    'a viewer cannot comment',
  );
  t.equal(
    (
      await call(W[2]!, 'POST', `/api/docs/${doc}/comments`, {
        token: carol,
        body: { start: ['x', 1], end: ['x', 2], body: 'no' },
      })
    ).status,
    400,
    'anchors must exist',
  );
  a.insert(0, 'This is ');
  await a.synced();
  const list = await call(W[0]!, 'GET', `/api/docs/${doc}/comments`, { token: bob });
  t.match(
    list.body.comments,
    [{ comment_id: cm.body.comment_id, author: 'carol', body: 'which one?', range: { index: 16, length: 3 } }],
    'the anchor follows the text',
  );
  t.equal(
    (await call(W[0]!, 'DELETE', `/api/docs/${doc}/comments/${cm.body.comment_id as string}`, { token: carol })).status,
    200,
  );

  // Named versions: saved, listed, restored as a forward change every client receives.
  const saved = await call(W[1]!, 'POST', `/api/docs/${doc}/snapshots`, { token: alice, body: { name: 'first' } });
  t.equal(saved.status, 200);
  const snapshotId = saved.body.snapshot_id as string;
  a.delete(0, a.length);
  a.insert(0, 'rewritten');
  await a.synced();
  const versions = await call(W[2]!, 'GET', `/api/docs/${doc}/snapshots`, { token: bob });
  t.match(versions.body.snapshots, [{ snapshot_id: snapshotId, name: 'first', revision: saved.body.revision }]);
  const restored = await call(W[2]!, 'POST', `/api/docs/${doc}/snapshots/${snapshotId}/restore`, { token: alice });
  t.equal(restored.status, 200);
  t.ok(
    (restored.body.revision as number) > (saved.body.revision as number),
    'a restore is a new revision (a forward op)',
  );
  await until('alice receives the restore', () => a.text() === 'This is version one');
  await until('the viewer receives it too', () =>
    v.messages.some((m) => m.type === 'op' && m.revision === restored.body.revision),
  );
  t.equal((await call(W[2]!, 'POST', `/api/docs/${doc}/snapshots/nope/restore`, { token: alice })).status, 404);

  // Revoking the viewer: its socket is closed with 4003 at the next permission check.
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: null } });
  t.equal((await v.waitClosed()).code, 4003, 'revoked: 4003');
  a.close();
});

t.test('pages and static files', async (t) => {
  const missing = await call(W[0]!, 'GET', '/static/nope.js');
  t.equal(missing.status, 404);
  t.equal((missing.body.error as { code: string }).code, 'not_found');
  t.equal((await call(W[0]!, 'GET', '/static/..%2Fpackage.json')).status, 404);
  const page = await call(W[0]!, 'GET', '/docs/abc');
  t.ok(page.status === 200 || page.status === 404, 'the page is served when built, else a JSON 404');
});

/** The op-log group serving a document. */
function groupOf(docId: string): string {
  const slot = hashSlot(docId);
  for (let i = 0; i < DEFAULT_GROUPS; i++) {
    const [a, b] = slotsOf(i, DEFAULT_GROUPS);
    if (slot >= a && slot <= b) return groupName(i);
  }
  throw new Error('no group');
}

/** The member leading the op-log group of a document. */
async function logLeader(docId: string): Promise<string> {
  const group = groupOf(docId);
  return until(
    `a leader of ${group}`,
    async () => {
      for (const m of cluster.members) {
        const r = await call(m, 'GET', `/v1/collab/groups/${group}/docs/${docId}`, { token, timeoutMs: 5_000 }).catch(
          () => null,
        );
        const leader = r?.headers['raft-leader'];
        if (r?.status === 200 && typeof leader === 'string') return leader;
      }
      return null;
    },
    60_000,
    200,
  );
}

t.test(
  "one socket's 40 op frames of 4 MB: each refused at once, nothing held, the owner's memory stays bounded",
  async (t) => {
    const doc = await newDoc('alice', alice);
    const a = await raw(0, doc, alice);
    a.send({ type: 'join', user_id: 'alice' });
    await a.wait('live', (m) => m.type === 'status' && m.state === 'live');
    const pid = (
      JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as {
        workers: Array<{ id: string; pid: number }>;
      }
    ).workers.find((w) => w.id === workers[0]!.id)!.pid;
    const rss = (): number =>
      Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN) * 1024;
    const MB = 1024 * 1024;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 20);
    const text = 'x'.repeat(4_100_000);
    for (let i = 0; i < 40; i++)
      a.send({
        type: 'op',
        op_id: `alice~m${i}:0`,
        op: [{ type: 'insert', id: [`alice~m${i}`, 0], lamport: i, left: null, right: null, text }],
        parent_revision: 0,
      });
    await until(
      'all 40 answered',
      () => a.messages.filter((m) => m.type === 'error' && String(m.op_id).startsWith('alice~m')).length === 40,
      120_000,
      50,
    );
    clearInterval(sampler);
    const after = rss();
    t.ok(
      a.messages
        .filter((m) => m.type === 'error' && String(m.op_id).startsWith('alice~m'))
        .every((m) => m.code === 'too_large'),
      'each refused too_large',
    );
    // Nothing of them is held: the growth is the garbage of parsing them, which the worker returns a few seconds later
    // (figures in the README; waiting for that here would cost 10-30 s of the suite). Before the op size limit the
    // changes were queued and retried for ever and the worker stayed ~190 MB up after the document was released.
    t.comment(
      `owner worker RSS: ${(before / MB).toFixed(0)} MB before, peak ${(peak / MB).toFixed(0)} MB, ${(after / MB).toFixed(0)} MB right after 40 frames of 4 MB`,
    );
    t.ok(peak - before < 384 * MB, `peak growth ${((peak - before) / MB).toFixed(0)} MB while 160 MB of ops arrived`);
    t.equal(await serverText(doc), '', 'nothing committed');
    a.ws.close();
  },
);

t.test('hostile input: an op over the append limit is refused to its author alone; the document goes on', async (t) => {
  const doc = await newDoc('alice', alice, 'start');
  t.equal(
    (await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } })).status,
    200,
  );
  const a = await raw(0, doc, alice);
  a.send({ type: 'join', user_id: 'alice' });
  await a.wait('alice live', (m) => m.type === 'status' && m.state === 'live');
  const b = await raw(1, doc, bob);
  b.send({ type: 'join', user_id: 'bob' });
  await b.wait('bob live', (m) => m.type === 'status' && m.state === 'live');
  // 1.1 MB in one op: under the 4 MiB frame limit, over the members' 1 MiB append limit.
  a.send({
    type: 'op',
    op_id: 'alice~big:0',
    op: [{ type: 'insert', id: ['alice~big', 0], lamport: 10, left: null, right: null, text: 'x'.repeat(1_100_000) }],
    parent_revision: 1,
  });
  const refused = await a.wait('the big op refused', (m) => m.type === 'error' && m.op_id === 'alice~big:0');
  t.equal(refused.code, 'too_large', 'too_large, to its author');
  t.match(refused.message, /at most 1047552 bytes/);
  // A later small edit by another editor commits, and so does the author's next one.
  b.send({
    type: 'op',
    op_id: 'bob~s:0',
    op: [{ type: 'insert', id: ['bob~s', 0], lamport: 20, left: null, right: null, text: 'B' }],
    parent_revision: 1,
  });
  t.equal(
    (await b.wait('bob acked', (m) => m.type === 'ack' && m.op_id === 'bob~s:0')).revision,
    2,
    "bob's edit committed",
  );
  a.send({
    type: 'op',
    op_id: 'alice~s:0',
    op: [{ type: 'insert', id: ['alice~s', 0], lamport: 30, left: null, right: null, text: 'A' }],
    parent_revision: 2,
  });
  t.equal(
    (await a.wait('alice acked', (m) => m.type === 'ack' && m.op_id === 'alice~s:0')).revision,
    3,
    "alice's next edit committed",
  );
  t.notOk(
    b.messages.some((m) => m.type === 'error'),
    'bob heard no error',
  );
  t.equal((await serverText(doc)).length, 'start'.length + 2, 'nothing of the big op in the log');
  // Bounded per client: more changes queued or in flight than two frames' worth are answered busy, not held.
  const burst = Array.from({ length: 12 }, (_, i) => ({
    type: 'op',
    op_id: `alice~q${i}:0`,
    op: [
      { type: 'insert', id: [`alice~q${i}`, 0], lamport: 40 + i, left: null, right: null, text: 'q'.repeat(1_000_000) },
    ],
    parent_revision: 3,
  }));
  // The op log's leader held still while the burst arrives, so the changes wait for it whatever the machine's load
  // (left running, it can commit each 1 MB entry before the next frame is read, and nothing ever waits).
  const holder = await logLeader(doc);
  t.equal((await cluster.run('pause', holder)).code, 0, `paused the op-log leader ${holder}`);
  try {
    for (const m of burst) a.send(m);
    await until(
      'a busy answer while the log cannot commit',
      () => a.messages.some((m) => m.type === 'error' && m.code === 'busy'),
      10_000,
      20,
    ).catch(() => undefined);
  } finally {
    t.equal((await cluster.run('resume', holder)).code, 0, `resumed ${holder}`);
  }
  await until(
    'every burst op answered',
    () => burst.every((m) => a.messages.some((x) => x.op_id === m.op_id && (x.type === 'ack' || x.type === 'error'))),
    60_000,
    50,
  );
  const busy = a.messages.filter((m) => m.type === 'error' && m.code === 'busy').length;
  t.ok(
    busy >= 1,
    `12 changes of 1 MB sent at once: ${busy} answered busy (at most 8 MiB of one client's changes wait)`,
  );
  a.ws.close();
  b.ws.close();
});

t.test(
  'an append the op log refuses (413) is not retried: its author hears too_large, the entries behind it commit',
  async (t) => {
    // This process owns a document as a worker would (lease, DocSession, the members' real endpoints) with its op size
    // check raised past the append limit, so the 1.1 MB change reaches a member and is refused there (the case the
    // check exists for: before it, the owner retried that append forever and nothing after it was committed).
    const doc = await newDoc('alice', alice, 'x');
    t.equal(
      (await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } })).status,
      200,
    );
    const log = new LogAccess(cluster.members, token);
    t.teardown(() => log.close());
    const acquired = await log.command(doc, {
      op: 'acquire',
      doc_id: doc,
      worker: 'test-owner',
      url: 'http://127.0.0.1:9',
    });
    if (!acquired.ok || acquired.op !== 'acquire' || !acquired.granted)
      throw new Error(`acquire: ${JSON.stringify(acquired)}`);
    const session = await DocSession.open(
      doc,
      acquired.owner.generation,
      log,
      100,
      { ended: () => undefined, log: () => undefined },
      4 * 1024 * 1024,
    );
    if (session === null) throw new Error('no session');
    t.teardown(() => session.end(1012, 'test over'));
    const conn = (user: string): Conn & { heard: Array<Record<string, unknown>> } => {
      const heard: Array<Record<string, unknown>> = [];
      // The client's socket is the one stand-in here: the session only sends to it.
      const ws = {
        readyState: 1,
        bufferedAmount: 0,
        send: (text: string) => heard.push(JSON.parse(text) as Record<string, unknown>),
        close: () => undefined,
        terminate: () => undefined,
      };
      return {
        ws: ws as unknown as Conn['ws'],
        user,
        role: 'editor',
        readOnly: false,
        presenceSentAt: 0,
        presenceTimer: null,
        presence: null,
        lastSeen: Date.now(),
        pending: 0,
        heard,
      };
    };
    const a = conn('alice');
    const b = conn('bob');
    session.join(a, undefined);
    session.join(b, undefined);
    const refusedBefore = appendStats.refused;
    // Two entries in flight: alice's 1.1 MB change alone, then bob's small one (it waits for the first: its sequence).
    session.submit(
      a,
      'alice~h:0',
      [{ type: 'insert', id: ['alice~h', 0], lamport: 10, left: null, right: null, text: 'h'.repeat(1_100_000) }],
      1,
    );
    session.submit(
      b,
      'bob~h:0',
      [{ type: 'insert', id: ['bob~h', 0], lamport: 11, left: null, right: null, text: 'b' }],
      1,
    );
    const refused = await until(
      'alice hears the refusal',
      () => a.heard.find((m) => m.type === 'error' && m.op_id === 'alice~h:0') ?? null,
      60_000,
      20,
    );
    t.equal(refused.code, 'too_large');
    t.match(refused.message, /413/);
    const ack = await until(
      'bob is acknowledged',
      () => b.heard.find((m) => m.type === 'ack' && m.op_id === 'bob~h:0') ?? null,
      60_000,
      20,
    );
    t.equal(ack.revision, 2, "bob's change, behind the refused entry, committed at revision 2");
    t.equal(appendStats.refused, refusedBefore + 1, 'one entry refused outright');
    t.notOk(
      b.heard.some((m) => m.type === 'error'),
      'bob heard no error',
    );
    t.equal(a.pending + b.pending, 0, 'nothing counted against either client any more');
    // And the session goes on: a later change commits at once.
    session.submit(
      a,
      'alice~h2:0',
      [{ type: 'insert', id: ['alice~h2', 0], lamport: 12, left: null, right: null, text: 'a' }],
      2,
    );
    t.equal(
      (
        await until(
          'alice acked',
          () => a.heard.find((m) => m.type === 'ack' && m.op_id === 'alice~h2:0') ?? null,
          60_000,
          20,
        )
      ).revision,
      3,
    );
    t.equal((await serverText(doc)).length, 3, 'x, b and a; nothing of the refused change');
    // One client's changes queued or in flight are bounded (8 MiB): ten changes of 1 MB in one turn, the last two busy.
    for (let i = 0; i < 10; i++)
      session.submit(
        b,
        `bob~q${i}:0`,
        [
          {
            type: 'insert',
            id: [`bob~q${i}`, 0],
            lamport: 100 + i,
            left: null,
            right: null,
            text: 'q'.repeat(1_000_000),
          },
        ],
        3,
      );
    t.same(
      b.heard.filter((m) => m.type === 'error' && m.code === 'busy').map((m) => m.op_id),
      ['bob~q8:0', 'bob~q9:0'],
      'the 9th and 10th answered busy, not held',
    );
    await until(
      'the eight others answered',
      () =>
        b.heard.filter((m) => m.type === 'error' && m.code === 'too_large' && String(m.op_id).startsWith('bob~q'))
          .length === 8,
      60_000,
      20,
    );
    t.equal(b.pending, 0, 'and no longer counted');
    await log.command(doc, { op: 'release', doc_id: doc, worker: 'test-owner', generation: acquired.owner.generation });
  },
);

t.test(
  'quota, delete: a user owns at most max_docs_per_user documents; the owner deletes one and its slot is free',
  async (t) => {
    const quinn = await userToken('quinn');
    const docs: string[] = [];
    for (let i = 0; i < 15; i++) docs.push(await newDoc('quinn', quinn));
    // All in the owner's home group, where the machine counts them exactly.
    const home = groupOf('quinn');
    t.ok(
      docs.every((d) => groupOf(d) === home),
      `every document of quinn is in ${home}`,
    );
    const over = await call(W[1]!, 'POST', '/api/docs', {
      token: quinn,
      body: { title: 'one too many', owner_id: 'quinn' },
    });
    t.equal(over.status, 403, 'the 16th create: 403');
    t.equal((over.body.error as { code: string }).code, 'quota_exceeded');
    const viaCluster = await call(W[2]!, 'POST', '/api/docs', {
      token,
      body: { title: 'for quinn', owner_id: 'quinn' },
    });
    t.equal(viaCluster.status, 403, 'the cluster token creating for quinn counts too');

    const doomed = docs[0]!;
    t.equal(
      (await call(W[0]!, 'PUT', `/api/docs/${doomed}/permissions/bob`, { token: quinn, body: { role: 'editor' } }))
        .status,
      200,
    );
    t.equal(
      (await call(W[0]!, 'DELETE', `/api/docs/${doomed}`, { token: bob })).status,
      403,
      'an editor cannot delete',
    );
    t.equal(
      (await call(W[0]!, 'DELETE', `/api/docs/${doomed}`, { token: dave })).status,
      404,
      'a stranger is told it does not exist',
    );
    // Open sockets: one served by the owner, one proxied through another worker; both close with 4404.
    const s1 = await raw(0, doomed, quinn);
    s1.send({ type: 'join', user_id: 'quinn' });
    await s1.wait('live', (m) => m.type === 'status' && m.state === 'live');
    const s2 = await raw(1, doomed, bob);
    s2.send({ type: 'join', user_id: 'bob' });
    await s2.wait('live', (m) => m.type === 'status' && m.state === 'live');
    const del = await call(W[2]!, 'DELETE', `/api/docs/${doomed}`, { token: quinn });
    t.equal(del.status, 200);
    t.same(del.body, { doc_id: doomed, deleted: true });
    t.equal((await s1.waitClosed(10_000)).code, 4404, 'its clients are closed with 4404');
    t.equal((await s2.waitClosed(10_000)).code, 4404, 'proxied ones too');
    t.equal((await call(W[0]!, 'GET', `/api/docs/${doomed}`, { token: quinn })).status, 404, 'gone');
    t.equal((await call(W[0]!, 'GET', `/api/docs/${doomed}`, { token })).status, 404, 'gone for the cluster token too');
    t.equal((await call(W[1]!, 'DELETE', `/api/docs/${doomed}`, { token: quinn })).status, 404, 'deleting again: 404');
    const listed = (await call(W[0]!, 'GET', '/api/docs', { token: quinn })).body.docs as Array<{ doc_id: string }>;
    t.equal(listed.length, 14);
    t.notOk(
      listed.some((d) => d.doc_id === doomed),
      'not listed',
    );
    const again = await raw(0, doomed, quinn);
    again.send({ type: 'join', user_id: 'quinn' });
    t.equal((await again.waitClosed()).code, 4404, 'joining it again: 4404');
    t.equal(
      (await call(W[1]!, 'POST', '/api/docs', { token: quinn, body: { title: 'fits again', owner_id: 'quinn' } }))
        .status,
      201,
      'the freed slot takes a new document',
    );
    t.equal(
      (await call(W[1]!, 'POST', '/api/docs', { token: quinn, body: { title: 'and no more', owner_id: 'quinn' } }))
        .status,
      403,
    );
  },
);

t.test('the owner dies and the op-log leader dies while three clients type: no acknowledged op is lost', async (t) => {
  const doc = await newDoc('alice', alice);
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } });
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: alice, body: { role: 'editor' } });
  const typists = [
    await connect(0, doc, 'alice', alice),
    await connect(1, doc, 'bob', bob),
    await connect(2, doc, 'carol', carol),
  ];
  const acked = new Map<CollabClient, string[]>();
  const statuses: string[] = [];
  typists[1]!.on('status', (s) => statuses.push(s));
  let typing = true;
  const loops = typists.map(async (c, k) => {
    const words: string[] = [];
    acked.set(c, words);
    for (let i = 0; typing; i++) {
      const word = `${'abc'[k]}${i};`;
      try {
        c.insert(c.length, word);
        words.push(word);
      } catch {
        // Not ready (rebuilding): skip a beat.
      }
      await new Promise((r) => setTimeout(r, 60));
    }
  });
  await new Promise((r) => setTimeout(r, 1500));
  const owner = await until('an owner', async () => (await get(`/api/docs/${doc}`)).worker as string | null);
  const kill = await cluster.run('kill', owner);
  t.equal(kill.code, 0, `killed the owner ${owner}`);
  await new Promise((r) => setTimeout(r, 3000));
  const leader = await logLeader(doc);
  t.equal((await cluster.run('kill', leader)).code, 0, `killed the op-log leader ${leader}`);
  await new Promise((r) => setTimeout(r, 3000));
  typing = false;
  await Promise.all(loops);
  const alive = typists.filter((c) => c.status !== 'closed');
  t.equal(alive.length, 3, 'no client gave up');
  await Promise.all(alive.map((c) => c.synced(120_000)));
  const text = await serverText(doc);
  for (const c of typists) {
    await until('client converged', () => c.text() === text, 60_000);
    for (const w of acked.get(c)!) if (!text.includes(w)) t.fail(`lost ${w}`);
  }
  t.ok(statuses.includes('syncing'), 'clients saw syncing');
  const newOwner = (await get(`/api/docs/${doc}`)).worker;
  t.not(newOwner, owner, `another worker owns it now (${String(newOwner)})`);
  t.ok(acked.get(typists[0]!)!.length > 10, 'they typed throughout');
  for (const c of typists) c.close();
  // Back for the later cases (the member is left down: four of five serve).
  t.equal((await cluster.run('restart', owner)).code, 0, `restarted ${owner}`);
});

t.test('a paused owner is replaced and fenced off when it wakes: no change lost', async (t) => {
  const doc = await newDoc('alice', alice, '');
  await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } });
  const a = await connect(0, doc, 'alice', alice);
  const b = await connect(1, doc, 'bob', bob);
  const owner = await until('an owner', async () => (await get(`/api/docs/${doc}`)).worker as string | null);
  let typing = true;
  const typed: string[] = [];
  const loops = [a, b].map(async (c, k) => {
    for (let i = 0; typing; i++) {
      const word = `${'pq'[k]}${i};`;
      c.insert(c.length, word);
      typed.push(word);
      await new Promise((r) => setTimeout(r, 80));
    }
  });
  await new Promise((r) => setTimeout(r, 1000));
  t.equal((await cluster.run('pause', owner)).code, 0, `paused the owner ${owner}`);
  await until(
    'another worker owns it',
    async () => {
      const w = (await get(`/api/docs/${doc}`)).worker;
      return typeof w === 'string' && w !== owner;
    },
    60_000,
    250,
  );
  await new Promise((r) => setTimeout(r, 1500));
  t.equal((await cluster.run('resume', owner)).code, 0, 'resumed it');
  await new Promise((r) => setTimeout(r, 1500));
  typing = false;
  await Promise.all(loops);
  await Promise.all([a.synced(120_000), b.synced(120_000)]);
  const text = await serverText(doc);
  await until('both converged', () => a.text() === text && b.text() === text, 60_000);
  t.same(
    typed.filter((w) => !text.includes(w)),
    [],
    'every change made is in the log',
  );
  a.close();
  b.close();
});

t.test('an idle document is released after a final snapshot, and taken again on join', async (t) => {
  const doc = await newDoc('alice', alice, 'idle');
  const a = await connect(2, doc, 'alice', alice);
  a.insert(4, '!');
  await a.synced();
  a.close();
  await until('released', async () => (await get(`/api/docs/${doc}`)).worker === null, 60_000, 250);
  const b = await connect(0, doc, 'alice', alice);
  t.equal(b.text(), 'idle!');
  b.close();
});

t.test(
  'editors beyond the limit join read-only and get a seat when one frees; the log fences stale owners',
  async (t) => {
    const doc = await newDoc('alice', alice);
    const editors = [
      await connect(0, doc, 'alice', alice),
      await connect(1, doc, 'alice', alice),
      await connect(2, doc, 'alice', alice),
    ];
    t.notOk(
      editors.some((e) => e.readOnly),
      'three editors (max_editors=3 in this cluster)',
    );
    const fourth = await connect(1, doc, 'alice', alice);
    t.ok(fourth.readOnly, 'the fourth joins read-only');
    t.throws(() => fourth.insert(0, 'x'), { code: 'read_only' }, 'and the client refuses local edits');
    editors[0]!.close();
    await until('a seat for the fourth', () => !fourth.readOnly, 30_000);
    fourth.insert(0, 'seated');
    await fourth.synced();
    await until('others see it', () => editors[1]!.text() === 'seated');
    // A change the log refuses (over 100K characters): the client drops it and rebuilds from the server's state.
    const errors: string[] = [];
    fourth.on('error', (e) => errors.push(e.code));
    fourth.insert(0, 'x'.repeat(100_001));
    await until('refused', () => errors.includes('too_large'));
    await until('rebuilt from the server', () => {
      try {
        return fourth.text() === 'seated';
      } catch {
        return false;
      }
    });
    await fourth.synced();
    t.equal(fourth.pendingCount, 0);

    // The op log refuses an append with a generation that is not the owner's.
    const view = await get(`/api/docs/${doc}`);
    t.type(view.worker, 'string');
    const group = groupOf(doc);
    const ops = [{ type: 'insert', id: ['alice~stale', 0], lamport: 50, left: null, right: null, text: 'stale' }];
    const stale = await until('an answer', async () => {
      for (const m of cluster.members) {
        const r = await call(m, 'POST', `/v1/collab/groups/${group}/commands`, {
          token,
          body: {
            op: 'append',
            doc_id: doc,
            generation: 0,
            changes: [{ op_id: 'alice~stale:0', author: 'alice', ops, parent_revision: 0 }],
          },
        }).catch(() => null);
        if (r?.status === 200) return r.body;
      }
      return null;
    });
    t.match(stale, { ok: false, code: 'stale_generation' });
    // Any live member (the op-log leader killed earlier stays down).
    const member = await until('a live member', async () => {
      for (const m of cluster.members)
        if ((await call(m, 'GET', '/healthz', { timeoutMs: 3_000 }).catch(() => null))?.status === 200) return m;
      return null;
    });
    const bad = await call(member, 'POST', `/v1/collab/groups/${group}/commands`, {
      token,
      body: { op: 'append', doc_id: doc },
    });
    t.equal(bad.status === 400 || bad.status === 421, true, 'a malformed command is a 4xx');
    t.equal(
      (await call(member, 'POST', `/v1/collab/groups/${group}/commands`, { token: alice, body: { op: 'compact' } }))
        .status,
      403,
      'internal endpoints take the cluster token only',
    );
    t.equal(await serverText(doc), 'seated');
    for (const e of [...editors, fourth]) e.close();
  },
);

t.test(
  'appends pipelined across an op-log leader kill: the log holds every change once, in each client order',
  async (t) => {
    // The member an earlier case left down comes back first: a group on three members must keep a majority when
    // this case kills its leader.
    for (const [i, m] of cluster.members.entries()) {
      if ((await call(m, 'GET', '/healthz', { timeoutMs: 3_000 }).catch(() => null))?.status !== 200) {
        t.equal((await cluster.run('restart', `n${i + 1}`)).code, 0, `restarted n${i + 1}`);
      }
    }
    await until(
      'every member up',
      async () => {
        for (const m of cluster.members)
          if ((await call(m, 'GET', '/healthz', { timeoutMs: 3_000 }).catch(() => null))?.status !== 200) return null;
        return true;
      },
      120_000,
      500,
    );
    const doc = await newDoc('alice', alice, '');
    await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/bob`, { token: alice, body: { role: 'editor' } });
    await call(W[0]!, 'PUT', `/api/docs/${doc}/permissions/carol`, { token: alice, body: { role: 'editor' } });
    const typists = [
      await connect(0, doc, 'alice', alice),
      await connect(1, doc, 'bob', bob),
      await connect(2, doc, 'carol', carol),
    ];
    const errors: string[] = [];
    for (const c of typists) c.on('error', (e) => errors.push(`${e.code}: ${e.message}`));
    const typed = new Map<CollabClient, string[]>();
    let typing = true;
    // Fast typists (three changes every ~10 ms) so that the owner holds several entries in flight.
    const loops = typists.map(async (c, k) => {
      const words: string[] = [];
      typed.set(c, words);
      for (let i = 0; typing; i++) {
        const word = `${'xyz'[k]}${i};`;
        try {
          c.insert(c.length, word);
          words.push(word);
        } catch {
          // Not ready (reconnecting): skip a beat.
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    });
    await new Promise((r) => setTimeout(r, 2000));
    const owner = await until('an owner', async () => (await get(`/api/docs/${doc}`)).worker as string | null);
    const leader = await logLeader(doc);
    t.equal((await cluster.run('kill', leader)).code, 0, `killed the op-log leader ${leader} with appends in flight`);
    await new Promise((r) => setTimeout(r, 4000));
    typing = false;
    await Promise.all(loops);
    await Promise.all(typists.map((c) => c.synced(120_000)));
    t.same(
      errors,
      [],
      'no change was refused (an entry applied out of order would refuse the next changes of a client)',
    );

    // No loss: every word typed is in the document, each client's words in its order.
    const text = await serverText(doc);
    for (const [k, c] of typists.entries()) {
      const words = typed.get(c)!;
      t.ok(words.length > 50, `typist ${k} typed ${words.length} words`);
      let at = -1;
      for (const w of words) {
        const next = text.indexOf(w, at + 1);
        if (next < 0) t.fail(`lost or out of order: ${w}`);
        at = next;
      }
    }
    // Order in the log itself: each client's ops continue its counters exactly, change after change, each op once.
    const group = groupOf(doc);
    const state = await until(
      'the log',
      async () => {
        for (const m of cluster.members) {
          const r = await call(m, 'GET', `/v1/collab/groups/${group}/docs/${doc}?view=state&since=0`, {
            token,
            timeoutMs: 10_000,
          }).catch(() => null);
          if (r?.status === 200)
            return r.body as {
              changes: Array<{
                revision: number;
                op_id: string;
                ops: Array<{ id: [string, number]; type: string; text?: string; length?: number }>;
              }>;
            };
        }
        return null;
      },
      60_000,
      200,
    );
    const next = new Map<string, number>();
    const opIds = new Set<string>();
    let revision = 0;
    let inOrder = true;
    for (const change of state.changes) {
      if (change.revision !== revision + 1) inOrder = false;
      revision = change.revision;
      if (opIds.has(change.op_id)) t.fail(`${change.op_id} is in the log twice`);
      opIds.add(change.op_id);
      for (const op of change.ops) {
        const [client, counter] = op.id;
        if (counter !== (next.get(client) ?? 0)) inOrder = false;
        next.set(client, counter + (op.type === 'insert' ? op.text!.length : op.type === 'delete' ? op.length! : 1));
      }
    }
    t.ok(inOrder, `the log's ${state.changes.length} changes are consecutive and continue each client's counters`);
    t.equal(
      opIds.size,
      typists.reduce((n, c) => n + typed.get(c)!.length, 0),
      'one change in the log per word typed',
    );
    // The owner did pipeline (a process-wide high-water mark; the other figures are for the record).
    const ownerUrl = workers.find((w) => w.id === owner)?.url ?? W[0]!;
    const metrics = await fetch(`${ownerUrl}/metrics`).then((r) => r.text());
    const windowMax = Number(/^collab_append_window_max (\d+)/m.exec(metrics)?.[1] ?? 0);
    t.ok(windowMax >= 2, `the owner had up to ${windowMax} append entries in flight`);
    t.comment(
      metrics
        .split('\n')
        .filter((l) => l.startsWith('collab_appends_resent'))
        .join('; '),
    );
    for (const c of typists) c.close();
    t.equal((await cluster.run('restart', leader)).code, 0, `restarted ${leader}`);
  },
);
