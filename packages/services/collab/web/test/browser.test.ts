// The editor page in a real browser on a real cluster: Debian's chromium driven by playwright-core, two users on
// two workers typing into one document at once, formatting, one going offline and typing, both converging; the
// screenshots are checked by their pixels (decoded by the browser itself) and the result through the DOM.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { call, startCluster, until, type TestCluster } from '@raftkit/testkit';
import { decodePng, launchChromium } from '@raftkit/testkit/browser';

const WAIT = 60_000;
const SHOTS = join(process.cwd(), 'jepsen-out', 'browser');

let cluster: TestCluster;
let browser: Browser;

t.before(async () => {
  // Permissions re-read every second (10 s by default), so the revocation case is quick.
  cluster = await startCluster('collab', { nodes: 3, settings: { permission_check_ms: '1000' } });
  browser = await launchChromium();
});

t.teardown(async () => {
  await browser?.close();
  await cluster?.down();
});

async function api(
  method: string,
  path: string,
  body: unknown,
  token = cluster.token,
): Promise<Record<string, unknown>> {
  const worker = cluster.workers[0]!.url;
  const answer = await call(worker, method, path, { token, body });
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body as Record<string, unknown>;
}

async function userToken(user: string): Promise<string> {
  return String((await api('POST', '/api/collab/users', { user_id: user }))['user_token']);
}

const text = (p: Page): Promise<string> =>
  p.evaluate(() => (window as unknown as { collab: { text(): string } }).collab.text());
const state = (p: Page): Promise<string | null> => p.getAttribute('#status', 'data-state');

/** Pixel figures of a PNG, decoded by the browser: how many pixels are dark (text) and how many are reddish. */
async function pixels(
  p: Page,
  png: Buffer,
): Promise<{ width: number; height: number; dark: number; reddish: number; colours: number }> {
  const { width, height, rgba } = await decodePng(p, png);
  let dark = 0;
  let reddish = 0;
  const colours = new Set<number>();
  for (let i = 0; i < rgba.length; i += 4) {
    const [r, g, b] = [rgba[i]!, rgba[i + 1]!, rgba[i + 2]!];
    if (r + g + b < 200) dark++;
    if (r > 200 && g < 225 && b < 225 && r - g > 25) reddish++;
    if (colours.size < 1000) colours.add((r << 16) | (g << 8) | b);
  }
  return { width, height, dark, reddish, colours: colours.size };
}

function save(name: string, png: Buffer): void {
  mkdirSync(SHOTS, { recursive: true });
  writeFileSync(join(SHOTS, name), png);
}

t.test('two pages edit one document at once, one offline, both converge', async (t) => {
  const alice = await userToken('alice');
  const bob = await userToken('bob');
  const docId = String((await api('POST', '/api/docs', { title: 'browser test', owner_id: 'alice' }, alice))['doc_id']);
  await api('PUT', `/api/docs/${docId}/permissions/bob`, { role: 'editor' });

  const contexts: BrowserContext[] = [await browser.newContext(), await browser.newContext()];
  const [ctxA, ctxB] = contexts as [BrowserContext, BrowserContext];
  const a = await ctxA.newPage();
  const b = await ctxB.newPage();
  const errors: string[] = [];
  for (const p of [a, b]) p.on('pageerror', (e) => errors.push(e.message));
  // Each user on another worker: one of them reaches the document through its owner's relay.
  await a.goto(`${cluster.workers[0]!.url}/docs/${docId}?user=alice&token=${encodeURIComponent(alice)}`);
  await b.goto(
    `${cluster.workers[1 % cluster.workers.length]!.url}/docs/${docId}?user=bob&token=${encodeURIComponent(bob)}`,
  );
  await a.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  await b.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  t.equal(await a.textContent('#doc-id'), docId, 'the page shows the document id from its path');

  // Both type at once: Alice her line, Bob his, into the same empty document.
  await a.click('.ql-editor');
  await b.click('.ql-editor');
  await Promise.all([a.keyboard.type('Hello from Alice', { delay: 15 }), b.keyboard.type('Bob here', { delay: 15 })]);
  let seen: string[] = [];
  await until(
    'both pages show both lines',
    async () => {
      const [ta, tb] = [await text(a), await text(b)];
      seen = [ta, tb, (await a.textContent('.ql-editor')) ?? '', (await b.textContent('.ql-editor')) ?? ''];
      return ta === tb && ta.includes('Hello from Alice') && ta.includes('Bob here') ? ta : null;
    },
    WAIT,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; documents and editors: ${JSON.stringify(seen)}`);
  });
  // No interleaving: each run of typing stays whole.
  const together = await text(a);
  t.ok(
    together === 'Hello from AliceBob here' || together === 'Bob hereHello from Alice',
    `runs typed at one place stay whole: ${JSON.stringify(together)}`,
  );

  // Alice breaks the line before Bob's words and makes her line a heading; Bob bolds "Alice" with Ctrl+B.
  await a.evaluate(
    (i) =>
      (
        window as unknown as { collab: { quill: { setSelection(i: number, l: number, s: string): void } } }
      ).collab.quill.setSelection(i, 0, 'user'),
    together.indexOf('Bob here') === 0 ? 8 : 16,
  );
  await a.keyboard.press('Enter');
  await until('the break reached Bob', async () => ((await text(b)).includes('\n') ? true : null), WAIT);
  const lines = (await text(a)).split('\n');
  const aliceLine = lines.findIndex((l) => l.includes('Alice'));
  const startOfAliceLine = lines.slice(0, aliceLine).reduce((n, l) => n + l.length + 1, 0);
  await a.evaluate(
    (i) =>
      (
        window as unknown as { collab: { quill: { setSelection(i: number, l: number, s: string): void } } }
      ).collab.quill.setSelection(i, 0, 'user'),
    startOfAliceLine,
  );
  await a.click('button.ql-header[value="1"]');
  await b.evaluate(
    (i) =>
      (
        window as unknown as { collab: { quill: { setSelection(i: number, l: number, s: string): void } } }
      ).collab.quill.setSelection(i, 5, 'user'),
    startOfAliceLine + 'Hello from '.length,
  );
  await b.keyboard.press('Control+b');
  await until(
    'heading and bold on both pages',
    async () => {
      const ok = await Promise.all(
        [a, b].map(
          async (p) =>
            (await p.locator('.ql-editor h1').count()) === 1 && (await p.locator('.ql-editor strong').count()) === 1,
        ),
      );
      return ok.every(Boolean) ? true : null;
    },
    WAIT,
  );
  t.equal((await a.textContent('.ql-editor h1'))?.trim(), 'Hello from Alice', 'Alice sees her line as a heading');
  t.equal(await b.textContent('.ql-editor strong'), 'Alice', 'Bob sees the bold word');
  t.equal(await a.textContent('.ql-editor strong'), 'Alice', 'Alice sees the bold word Bob set');
  // Bob's selection is shown on Alice's page (quill-cursors), in his colour.
  await until(
    "Bob's cursor on Alice's page",
    async () => ((await a.locator('.ql-cursor').count()) > 0 ? true : null),
    WAIT,
  );
  t.pass('a remote cursor is drawn');

  // Bob goes offline and keeps typing; Alice types meanwhile.
  await ctxB.setOffline(true);
  await until("Bob's page says offline", async () => ((await state(b)) === 'offline' ? true : null), WAIT);
  await b.evaluate(() =>
    (
      window as unknown as {
        collab: { quill: { setSelection(i: number, l: number, s: string): void; getLength(): number } };
      }
    ).collab.quill.setSelection(1e6, 0, 'user'),
  );
  await b.keyboard.type(' and offline words', { delay: 10 });
  await a.evaluate(() =>
    (
      window as unknown as { collab: { quill: { setSelection(i: number, l: number, s: string): void } } }
    ).collab.quill.setSelection(0, 0, 'user'),
  );
  await a.keyboard.type('Online: ', { delay: 10 });
  await until("Alice's words reached the server", async () => ((await state(a)) === 'live' ? true : null), WAIT);
  t.notOk((await text(a)).includes('offline words'), "Bob's offline words have not reached Alice");
  t.match(await b.textContent('#status'), /offline.*waiting/, "Bob's page counts the changes waiting");
  const offlineShot = await b.screenshot();
  save('bob-offline.png', offlineShot);
  const off = await pixels(b, offlineShot);
  t.ok(off.reddish > 200, `the offline badge is drawn (${off.reddish} reddish pixels)`);

  await ctxB.setOffline(false);
  const final = await until(
    'both pages converge after Bob is back',
    async () => {
      const [ta, tb] = [await text(a), await text(b)];
      return ta === tb &&
        ta.includes('offline words') &&
        ta.includes('Online: ') &&
        (await state(a)) === 'live' &&
        (await state(b)) === 'live'
        ? ta
        : null;
    },
    WAIT,
  );
  t.match(final, /^Online: /, "Alice's words are first");
  t.match(final, /and offline words/, "Bob's offline words are in");
  const htmlA = await a.innerHTML('.ql-editor');
  t.equal(await b.innerHTML('.ql-editor'), htmlA, 'both editors show the same formatted document');

  for (const [name, p] of [
    ['alice.png', a],
    ['bob.png', b],
  ] as const) {
    const shot = await p.locator('.ql-editor').screenshot();
    save(name, shot);
    const px = await pixels(p, shot);
    t.ok(px.width > 100 && px.height > 50, `${name}: the editor has a size (${px.width}x${px.height})`);
    t.ok(px.dark > 500 && px.colours > 10, `${name}: not blank (${px.dark} dark pixels, ${px.colours} colours)`);
  }

  // Ctrl+Z on Bob's page takes back Bob's own last keystroke, not Alice's later words.
  await b.keyboard.press('Control+z');
  const undone = await until(
    "Bob's undo reached Alice",
    async () => {
      const ta = await text(a);
      return ta === (await text(b)) && ta !== final ? ta : null;
    },
    WAIT,
  );
  t.equal(undone, final.replace('offline words', 'offline word'), "undo removed Bob's last keystroke only");
  await b.keyboard.press('Control+Shift+z');
  await until(
    "Bob's redo reached Alice",
    async () => ((await text(a)) === final && (await text(b)) === final ? true : null),
    WAIT,
  );
  t.pass('redo put it back');

  // A third page loading afresh gets the same document from the service.
  const c = await (await browser.newContext()).newPage();
  await c.goto(
    `${cluster.workers[cluster.workers.length - 1]!.url}/docs/${docId}?user=alice&token=${encodeURIComponent(alice)}`,
  );
  await c.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  await until('a fresh page shows the document', async () => ((await text(c)) === final ? true : null), WAIT);
  t.equal(await c.innerHTML('.ql-editor'), htmlA, 'a fresh page renders the same formatted document');
  t.same(errors, [], 'no page errors');
});

t.test("a viewer's page is read-only; a revoked user's page closes", async (t) => {
  const alice = await userToken('alice');
  const carol = await userToken('carol');
  const docId = String((await api('POST', '/api/docs', { title: 'viewer test', owner_id: 'alice' }, alice))['doc_id']);
  await api('PUT', `/api/docs/${docId}/permissions/carol`, { role: 'viewer' });
  const a = await (await browser.newContext()).newPage();
  const c = await (await browser.newContext()).newPage();
  await a.goto(`${cluster.workers[0]!.url}/docs/${docId}?user=alice&token=${encodeURIComponent(alice)}`);
  await c.goto(
    `${cluster.workers[1 % cluster.workers.length]!.url}/docs/${docId}?user=carol&token=${encodeURIComponent(carol)}`,
  );
  await a.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  await c.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  await a.click('.ql-editor');
  await a.keyboard.type('Only Alice writes here', { delay: 10 });
  await until(
    "Carol sees Alice's words",
    async () => ((await text(c)) === 'Only Alice writes here' ? true : null),
    WAIT,
  );
  t.match(await c.textContent('#status'), /read-only/, "Carol's badge says read-only");
  t.equal(await c.getAttribute('.ql-editor', 'contenteditable'), 'false', "Carol's editor takes no typing");
  await c.click('.ql-editor');
  await c.keyboard.type('carol was here');
  await c.waitForTimeout(500);
  t.equal(await text(a), 'Only Alice writes here', 'nothing Carol typed reached Alice');

  // Revoked: Carol's connection is closed with 4003 and her page says so.
  await api('PUT', `/api/docs/${docId}/permissions/carol`, { role: null });
  await until("Carol's page is closed", async () => ((await state(c)) === 'closed' ? true : null), WAIT);
  t.match(await c.textContent('#error'), /4003/, 'the page shows why (4003)');
  t.equal(await c.getAttribute('.ql-editor', 'contenteditable'), 'false', 'the closed editor takes no typing');
});
