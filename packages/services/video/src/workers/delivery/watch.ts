/**
 * Serves the player page (packages/services/video/web, bundled into web/dist by `make build`): GET /watch/{video_id} is
 * the page, GET /watch/assets/{file} its script. Open routes: a viewer has no token to show for the page itself;
 * the page calls the app tier's API with its own. The edges register it, and so can the app tier.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { HttpError, notFound, type Router } from '@raftkit/http';

/** web/dist, from dist/src/delivery/ of this package. */
export const WEB_DIST = fileURLToPath(new URL('../../../../web/dist/', import.meta.url));

const ASSETS: Record<string, string> = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.js.map': 'application/json',
  'app.css': 'text/css; charset=utf-8',
};

async function file(name: string): Promise<Buffer> {
  try {
    return await readFile(WEB_DIST + name);
  } catch {
    throw new HttpError(
      503,
      'page_not_built',
      `the player page is not built (${WEB_DIST}${name} is missing): run make build`,
    );
  }
}

export function registerWatchPage(router: Router): void {
  router
    .get('/watch/:video_id', { admits: 'open' }, async (ctx) => {
      if (!/^[A-Za-z0-9_-]{1,128}$/.test(ctx.params['video_id']!)) throw notFound('no such video page');
      const html = await file('index.html');
      ctx.res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        'content-length': html.length,
      });
      ctx.res.end(html);
    })
    .get('/watch/assets/:file', { admits: 'open' }, async (ctx) => {
      const type = ASSETS[ctx.params['file']!];
      if (type === undefined) throw notFound(`no asset ${ctx.params['file']}`);
      const body = await file(ctx.params['file']!);
      // Not immutable: the name does not change with a rebuild.
      ctx.res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache', 'content-length': body.length });
      ctx.res.end(body);
    });
}
