// The dashboard page in a real browser on a real cluster: a 5-member kv cluster started by the CLI in a temporary
// data root, `cluster dashboard` on that root, Debian's chromium driven by playwright-core. From the page: kill the
// leader (button + confirmation), see a new leader; partition (drag the leader alone to side B), heal, pause and
// resume a follower. Screenshots at each step are decoded by the browser itself and compared by their pixels; any page
// error or console error fails the test.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { Browser, Page } from 'playwright-core';
import { CLUSTER_CLI, freePort, reservePorts, runCli, until, type PortRange } from '@raftkit/testkit';
import { decodePng, launchChromium, type DecodedPng } from '@raftkit/testkit/browser';

const WAIT = 60_000;
/** The brief's bound for the page to show a new leader after the kill (election plus one collector push). */
const NEW_LEADER_MS = 20_000;
const SHOTS = join(process.cwd(), 'jepsen-out', 'dashboard');

let root = '';
let ports: PortRange | null = null;
let dashboard: ChildProcess | null = null;
let browser: Browser | null = null;
let url = '';
let token = '';

async function stopDashboard(): Promise<void> {
  const d = dashboard;
  dashboard = null;
  if (d === null || d.exitCode !== null || d.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => d.once('exit', () => resolve()));
  d.kill('SIGTERM');
  const timer = setTimeout(() => d.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

const started = Date.now();
/** Where the time goes (a comment in the TAP output, never asserted). */
const mark = (what: string): void => t.comment(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);

t.before(async () => {
  const bundle = fileURLToPath(new URL('../../web/dist/assets/app.js', import.meta.url));
  if (!existsSync(bundle))
    throw new Error(`${bundle} is missing: make build (node scripts/build-web.mjs cluster/web) bundles the page`);
  root = mkdtempSync(join(tmpdir(), 'dashboard-it-'));
  ports = await reservePorts();
  const dataDir = join(root, 'kv');
  // Browser, cluster and dashboard start side by side (each takes seconds on a loaded machine): the dashboard gets
  // the cluster's token up front and finds the cluster folder on a rescan, as it finds any cluster started later.
  token = randomBytes(24).toString('base64url');
  const launching = launchChromium();
  launching.catch(() => undefined);
  const clusterUp = runCli([
    'up',
    '--service',
    'kv',
    '--nodes',
    '5',
    '--data',
    dataDir,
    '--base-port',
    String(ports.base),
    '--tick-ms',
    '50',
    '--auth-token',
    token,
  ]);

  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLUSTER_AUTH_TOKEN;
  delete env.CLUSTER_DATA;
  const jepsenDir = join(root, 'jepsen-out');
  mkdirSync(jepsenDir);
  // Two runs in the shape jepsen-like's runner leaves (report.html, result.json): one valid, one not.
  for (const [name, valid, nemesis] of [
    ['kv-ok', true, ['partition', 'kill']],
    ['kv-bad', false, ['pause']],
  ] as const) {
    mkdirSync(join(jepsenDir, name));
    writeFileSync(
      join(jepsenDir, name, 'result.json'),
      JSON.stringify({ valid, run: { workload: 'register', nemesis } }),
    );
    writeFileSync(
      join(jepsenDir, name, 'report.html'),
      `<!doctype html><title>${name}</title><h1>report of ${name}</h1>`,
    );
  }
  const child = spawn(
    process.execPath,
    [
      CLUSTER_CLI,
      'dashboard',
      '--data-root',
      root,
      '--port',
      String(port),
      '--jepsen-dir',
      jepsenDir,
      '--auth-token',
      token,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  dashboard = child;
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  url = await until(
    'the dashboard to print its address',
    () => {
      if (child.exitCode !== null) throw new Error(`cluster dashboard exited (${child.exitCode}): ${out}`);
      return /dashboard: (http:\/\/\S+#token=\S+)/.exec(out)?.[1] ?? null;
    },
    WAIT,
  ).catch((e: Error) => {
    throw new Error(`${e.message}; output: ${out}`);
  });
  mark('dashboard up');
  const up = await clusterUp;
  if (up.code !== 0) throw new Error(`cluster up failed (${up.code}): ${up.stderr}${up.stdout}`);
  t.equal(readFileSync(join(dataDir, 'token'), 'utf8').trim(), token, 'the cluster took the token given');
  mark('cluster and dashboard up');
  browser = await launching;
  mark('browser up');
});

t.teardown(async () => {
  await Promise.all([
    browser?.close().catch(() => undefined),
    stopDashboard(),
    root === '' ? undefined : runCli(['down', '--wipe', '--data', join(root, 'kv')]),
  ]);
  if (root !== '') rmSync(root, { recursive: true, force: true });
  ports?.release();
  mark('all stopped');
});

/** Every member row's state, as the page shows it. */
const states = (p: Page): Promise<Record<string, string>> =>
  p.$$eval('tr[data-testid^="member-row-"]', (rows) =>
    Object.fromEntries(
      rows.map((r) => [r.getAttribute('data-testid')!.slice('member-row-'.length), r.getAttribute('data-state') ?? '']),
    ),
  );

const leaderOf = (s: Record<string, string>): string | null => {
  const leaders = Object.keys(s).filter((id) => s[id] === 'leader');
  return leaders.length === 1 ? leaders[0]! : null;
};

/** Timeline entries of one kind, as text. */
const eventsOf = (p: Page, kind: string): Promise<string[]> =>
  p.$$eval(`[data-testid="timeline"] li[data-kind="${kind}"]`, (lis) => lis.map((li) => li.textContent ?? ''));

interface Pixels extends DecodedPng {
  colours: number;
}

/** A PNG decoded by the browser: its size, how many colours (counted up to 2,000), its pixels. */
async function decode(p: Page, png: Buffer): Promise<Pixels> {
  const d = await decodePng(p, png);
  const colours = new Set<number>();
  for (let i = 0; i < d.rgba.length && colours.size < 2000; i += 4)
    colours.add((d.rgba[i]! << 16) | (d.rgba[i + 1]! << 8) | d.rgba[i + 2]!);
  return { ...d, colours: colours.size };
}

function differing(a: Pixels, b: Pixels): number {
  const x = a.rgba;
  const y = b.rgba;
  let n = 0;
  for (let i = 0; i + 3 < Math.min(x.length, y.length); i += 4)
    if (x[i] !== y[i] || x[i + 1] !== y[i + 1] || x[i + 2] !== y[i + 2]) n++;
  return n;
}

t.test('without a token the page asks for one, refuses a wrong one, and lists the jepsen-like runs', async (t) => {
  const context = await browser!.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // The refused calls are expected here (the browser logs each 401); anything else is not.
    if (m.type() === 'error' && !m.text().includes('401')) problems.push(`console error: ${m.text()}`);
  });
  await page.goto(url.slice(0, url.indexOf('#')));
  await page.waitForSelector('[data-testid="login-form"]', { timeout: WAIT });
  t.equal(await page.locator('[data-testid="members"]').count(), 0, 'no data before logging in');
  await page.fill('[data-testid="token-input"]', 'not-the-token');
  await page.click('[data-testid="token-submit"]');
  await page.waitForSelector('[data-testid="login-error"]', { timeout: WAIT });
  t.match(await page.textContent('[data-testid="login-error"]'), /refused/, 'a wrong token is refused');
  await page.fill('[data-testid="token-input"]', token);
  await page.click('[data-testid="token-submit"]');
  await page.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  await page.waitForSelector('[data-testid="jepsen-runs"]', { timeout: WAIT });
  t.match(
    await page.textContent('[data-testid="jepsen-kv-ok"]'),
    /register.*partition,kill.*valid/,
    'the valid run and its verdict',
  );
  t.match(await page.textContent('[data-testid="jepsen-kv-bad"]'), /INVALID/, 'the failed run and its verdict');
  const href = await page.getAttribute('[data-testid="jepsen-kv-bad"] a', 'href');
  t.equal(href, '/jepsen/kv-bad/report.html', 'each run links to its report');
  // The link works with the page's session cookie.
  const report = await context.request.get(new URL(href!, page.url()).toString());
  t.equal(report.status(), 200, 'the report is served');
  t.match(await report.text(), /report of kv-bad/, 'the right report');
  t.same(problems, [], 'no page error and no unexpected console error');
  await context.close();
});

t.test('the page shows the cluster, and kill, partition, heal, pause and resume from it show on it', async (t) => {
  const context = await browser!.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });

  const shots = new Map<string, Pixels>();
  const shoot = async (name: string): Promise<Pixels> => {
    const png = await page.screenshot();
    mkdirSync(SHOTS, { recursive: true });
    writeFileSync(join(SHOTS, `${name}.png`), png);
    t.ok(png.length > 20_000, `${name}: a non-trivial PNG (${png.length} bytes)`);
    const px = await decode(page, png);
    t.same([px.width, px.height], [1400, 1000], `${name}: decodes at the viewport's size`);
    t.ok(px.colours > 50, `${name}: not blank (${px.colours} colours)`);
    shots.set(name, px);
    return px;
  };

  t.ok(url.endsWith(`#token=${encodeURIComponent(token)}`), 'the printed address carries the cluster token');
  await page.goto(url);
  await page.waitForSelector('body[data-loaded="true"]', { timeout: WAIT });
  t.equal(new URL(page.url()).hash, '', 'the token is dropped from the address once logged in');
  await page.waitForSelector('[data-testid="live-status"][data-state="live"]', { timeout: WAIT });
  t.match(await page.textContent('[data-testid="cluster-picker"]'), /kv/, 'the picker lists the kv cluster');

  const before = await until(
    '5 members and one leader on the page',
    async () => {
      const s = await states(page);
      return Object.keys(s).length === 5 && leaderOf(s) !== null ? s : null;
    },
    WAIT,
  );
  t.same(Object.keys(before).sort(), ['n1', 'n2', 'n3', 'n4', 'n5'], 'five members shown');
  const oldLeader = leaderOf(before)!;
  t.equal(await page.textContent('[data-testid="cluster-leader"]'), oldLeader, 'the header names the leader');
  t.equal(await page.locator('[data-testid^="group-row-"]').count(), 1, 'one group for a single-group service');
  await page.waitForSelector('[data-testid="chart-rps"] canvas', { timeout: WAIT });
  await shoot('1-before');
  mark('5 members and a leader shown');

  // Kill the leader: the button asks first; Escape drops the question and nothing is done.
  await page.click(`[data-testid="kill-${oldLeader}"]`);
  await page.waitForSelector('[data-testid="confirm-dialog"]', { timeout: WAIT });
  await page.keyboard.press('Escape');
  await page.waitForSelector('[data-testid="confirm-dialog"]', { state: 'detached', timeout: WAIT });
  t.same(await eventsOf(page, 'fault'), [], 'a cancelled kill is no fault');
  await page.click(`[data-testid="kill-${oldLeader}"]`);
  await page.waitForSelector('[data-testid="confirm-dialog"]', { timeout: WAIT });
  t.match(
    await page.textContent('[data-testid="confirm-dialog"]'),
    new RegExp(`Kill ${oldLeader}`),
    'the dialog names the member',
  );
  await shoot('2-confirm');
  const killedAt = Date.now();
  await page.click('[data-testid="confirm-yes"]');
  const afterKill = await until(
    'a new leader on the page',
    async () => {
      const s = await states(page);
      const l = leaderOf(s);
      return s[oldLeader] === 'down' && l !== null && l !== oldLeader ? s : null;
    },
    WAIT,
  );
  const newLeader = leaderOf(afterKill)!;
  const tookMs = Date.now() - killedAt;
  t.ok(
    tookMs <= NEW_LEADER_MS,
    `new leader ${newLeader} shown ${tookMs} ms after the kill of ${oldLeader} (bound ${NEW_LEADER_MS} ms)`,
  );
  const killEvents = await until(
    'the kill on the timeline',
    async () => {
      const faults = await eventsOf(page, 'fault');
      return faults.some((f) => f.includes(oldLeader)) ? faults : null;
    },
    WAIT,
  );
  t.equal(killEvents.length, 1, 'one fault event so far');
  await until(
    'the leader change on the timeline',
    async () => ((await eventsOf(page, 'leader')).some((e) => e.includes(newLeader)) ? true : null),
    WAIT,
  );
  mark('new leader shown');
  const killedShot = await shoot('3-after-kill');
  const changed = differing(shots.get('1-before')!, killedShot);
  t.ok(changed > 500, `the page looks different after the kill (${changed} pixels changed)`);

  // Partition: drag the new leader alone into side B, then confirm.
  await page.locator(`[data-testid="chip-${newLeader}"]`).dragTo(page.locator('[data-testid="side-b"]'));
  t.equal(
    await page.locator(`[data-testid="side-b"] [data-testid="chip-${newLeader}"]`).count(),
    1,
    'the dragged chip is on side B',
  );
  t.equal(await page.locator('[data-testid="side-b"] .chip').count(), 1, 'alone');
  // The click fallback moves a chip across and back.
  await page.click(`[data-testid="chip-${newLeader}"]`);
  t.equal(
    await page.locator(`[data-testid="side-a"] [data-testid="chip-${newLeader}"]`).count(),
    1,
    'a click moves it back to side A',
  );
  await page.click(`[data-testid="chip-${newLeader}"]`);
  t.equal(
    await page.locator(`[data-testid="side-b"] [data-testid="chip-${newLeader}"]`).count(),
    1,
    'and again to side B',
  );
  await page.click('[data-testid="partition-apply"]');
  await page.waitForSelector('[data-testid="confirm-dialog"]', { timeout: WAIT });
  await page.click('[data-testid="confirm-yes"]');
  await page.waitForSelector('[data-testid="partition-status"][data-active="true"]', { timeout: WAIT });
  const shown = (await page.textContent('[data-testid="partition-status"]')) ?? '';
  const sides = shown
    .replace(/^partitioned:\s*/, '')
    .split('|')
    .map((side) => side.trim());
  t.ok(sides.length === 2 && sides.includes(newLeader), `the partition is shown with the leader alone: ${shown}`);
  await until(
    'the partition on the timeline',
    async () => ((await eventsOf(page, 'fault')).length >= 2 ? true : null),
    WAIT,
  );
  // The majority side (three live members of five) elects a leader of its own.
  await until(
    'a leader on the majority side',
    async () => {
      const s = await states(page);
      return Object.keys(s).some((id) => id !== newLeader && id !== oldLeader && s[id] === 'leader') ? true : null;
    },
    WAIT,
  );
  mark('partition shown');
  const partitionShot = await shoot('4-partitioned');
  t.ok(differing(killedShot, partitionShot) > 500, 'the page looks different once partitioned');

  // Heal: no confirmation needed.
  await page.click('[data-testid="heal"]');
  await page.waitForSelector('[data-testid="partition-status"][data-active="false"]', { timeout: WAIT });
  await until(
    'the heal on the timeline',
    async () => ((await eventsOf(page, 'fault')).length >= 3 ? true : null),
    WAIT,
  );
  mark('heal shown');
  await shoot('5-healed');

  // A follower stops and returns: pause (confirmed), then resume (no confirmation). A pause instead of restarting
  // the killed member: the page path is the same, and a member's cold start costs many seconds on a loaded machine.
  const follower = Object.keys(afterKill).find((id) => id !== oldLeader && id !== newLeader)!;
  await page.click(`[data-testid="pause-${follower}"]`);
  await page.click('[data-testid="confirm-yes"]');
  await page.waitForSelector(`[data-testid="member-row-${follower}"][data-state="paused"]`, { timeout: WAIT });
  mark('pause shown');
  await shoot('6-paused');
  await page.click(`[data-testid="resume-${follower}"]`);
  await until(
    `${follower} back on the page`,
    async () => {
      const s = await states(page);
      return s[follower] === 'follower' || s[follower] === 'leader' ? true : null;
    },
    WAIT,
  );
  await until(
    'kill, partition, heal, pause and resume on the timeline',
    async () => ((await eventsOf(page, 'fault')).length >= 5 ? true : null),
    WAIT,
  );
  mark('resume shown');
  t.equal(await page.locator('[data-testid="error"]').count(), 0, 'no action reported an error');

  // The whole page once more (timeline included), kept for people to look at.
  writeFileSync(join(SHOTS, '7-full-page.png'), await page.screenshot({ fullPage: true }));

  t.same(problems, [], 'no page error and no console error');
  await context.close();
});
