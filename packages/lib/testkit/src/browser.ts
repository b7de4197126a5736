/**
 * Debian's chromium driven by playwright-core, for the browser tests of every service's page (collab's editor,
 * video's player). Its own entry point (`@raftkit/testkit/browser`), so tests without a browser never load
 * playwright. `make test-packages` installs chromium.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

/** A headless chromium; fails naming the missing binary rather than skipping. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: make test-packages installs Debian's chromium`);
  // No sandbox: tests run as root in containers, where chromium's sandbox cannot start.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--autoplay-policy=no-user-gesture-required'],
  });
}

/** A PNG (a screenshot) decoded: its size and its pixels, 4 bytes (RGBA) each, row by row. */
export interface DecodedPng {
  width: number;
  height: number;
  rgba: Buffer;
}

/** Decodes a PNG in the page's browser (no image library here), for tests that check what a screenshot shows. */
export async function decodePng(page: Page, png: Buffer): Promise<DecodedPng> {
  const decoded = await page.evaluate(async (b64) => {
    // Browser globals, typed here because the tests compile without the DOM library.
    interface Bitmap {
      width: number;
      height: number;
    }
    interface Ctx2d {
      drawImage(b: Bitmap, x: number, y: number): void;
      getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
    }
    const g = globalThis as unknown as {
      createImageBitmap(b: Blob): Promise<Bitmap>;
      OffscreenCanvas: new (w: number, h: number) => { getContext(kind: '2d'): Ctx2d | null };
    };
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bitmap = await g.createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const canvas = new g.OffscreenCanvas(bitmap.width, bitmap.height);
    const ctx = canvas.getContext('2d')!;
    ctx.drawImage(bitmap, 0, 0);
    const data = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
    let s = '';
    for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
    return { width: bitmap.width, height: bitmap.height, data: btoa(s) };
  }, png.toString('base64'));
  return { width: decoded.width, height: decoded.height, rgba: Buffer.from(decoded.data, 'base64') };
}
