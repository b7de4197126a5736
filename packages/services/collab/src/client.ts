/**
 * CollabClient for Node programs: the browser-safe core (src/client-core.ts) with the `ws` WebSocket injected.
 *
 *   const c = await CollabClient.connect({ url: 'http://127.0.0.1:8041', docId, userId: 'alice', token });
 *   c.insert(0, 'hello'); await c.synced(); c.text();
 */
import WebSocket from 'ws';
import {
  CollabClient as CoreClient,
  type CollabClientOptions,
  type SocketFactory,
  type SocketLike,
} from './client-core.js';

export const nodeSocket: SocketFactory = (url) =>
  new WebSocket(url, { maxPayload: 64 * 1024 * 1024 }) as unknown as SocketLike;

export class CollabClient extends CoreClient {
  static override async connect(
    options: Omit<CollabClientOptions, 'socket'> & { socket?: SocketFactory },
  ): Promise<CollabClient> {
    const client = new CollabClient({ ...options, socket: options.socket ?? nodeSocket });
    await client.start();
    return client;
  }
}

export { CollabError } from './client-core.js';
export type {
  ClientStatus,
  CollabClientOptions,
  CollabEvents,
  PresenceEvent,
  SocketFactory,
  SocketLike,
} from './client-core.js';
