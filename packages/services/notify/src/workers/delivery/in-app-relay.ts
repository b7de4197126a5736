/**
 * In-app items pushed to the WebSocket clients of every delivery worker, not only the one that owns the in_app
 * channel: a client connects to one worker, and the consumer group may hand the channel to another (a lapsed
 * lease, a restart), so the owner relays each item to its peers, which push it to their own clients of that user.
 * Best effort, as the push itself is (the inbox holds every item): at most MAX_IN_FLIGHT relays at once, the rest
 * dropped and counted, each with a short timeout.
 */
import { request } from 'undici';
import type { InAppItem } from './channels/channel.js';

const MAX_IN_FLIGHT = 256;
const TIMEOUT_MS = 2_000;
export const IN_APP_RELAY_PATH = '/internal/in-app/push';

export class InAppRelay {
  private inFlight = 0;
  dropped = 0;

  constructor(
    /** The peers' HTTP addresses (host:port), this worker left out. */
    private readonly peers: readonly string[],
    private readonly token: string,
  ) {}

  relay(item: InAppItem): void {
    const body = JSON.stringify(item);
    for (const peer of this.peers) {
      if (this.inFlight >= MAX_IN_FLIGHT) {
        this.dropped++;
        continue;
      }
      this.inFlight++;
      request(`http://${peer}${IN_APP_RELAY_PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
        body,
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
      })
        .then((res) => res.body.dump())
        .catch(() => {
          this.dropped++;
        })
        .finally(() => {
          this.inFlight--;
        });
    }
  }
}
