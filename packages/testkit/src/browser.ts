/**
 * Debian's chromium driven by playwright-core, for the browser tests of every service's page (collab's editor,
 * video's player). Its own entry point (`@raftkit/testkit/browser`), so tests without a browser never load
 * playwright. `make test-packages` installs chromium.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** A headless chromium; fails naming the missing binary rather than skipping. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: make test-packages installs Debian's chromium`);
  // No sandbox: tests run as root in containers, where chromium's sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--autoplay-policy=no-user-gesture-required'] });
}
