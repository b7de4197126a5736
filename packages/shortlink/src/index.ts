/**
 * @raftkit/shortlink: the short-link service. Raft members run the link store (ids, links); "app" workers serve
 * the public API and redirects; the click workers (src/clicks) stream and count clicks. README.md has the contract.
 */
import type { ServiceDefinition } from '@raftkit/http';
import { linkRoutes } from './api.js';
import { appRole } from './app.js';
import { ClickEmitter, clickWorkerRoles, countryOf, fetchStats } from './clicks/index.js';
import { LinkMachine, type LinkCommand, type LinkResult } from './machine.js';

export { LinkMachine, LEASE_SIZE } from './machine.js';
export type { Link, LinkCommand, LinkResult, LinkChange, CreateSpec, CreateOutcome } from './machine.js';
export { linkRoutes } from './api.js';
export type { LinkRecord, BatchItemResult } from './api.js';
export { appRole, startApp, DEFAULT_APP_COUNT } from './app.js';
export type { Click, ClickSide } from './app.js';
export { permute, unpermute, encodeBase62, decodeBase62, codeForId, idForCode, ID_SPACE, RESERVED_CODES } from './codes.js';

/** The app server's click side: the real stream emitter, GeoIP and analytics. */
const app = appRole({
  emitter: (options, metrics) =>
    new ClickEmitter({ workers: options.workers, token: options.tokens[0]!, settings: options.settings, logger: options.logger, metrics }),
  countryOf,
  stats: (options, code) => fetchStats({ workers: options.workers, token: options.tokens[0]! }, code),
});

/**
 * Ticks (100 ms each by default) between the link store leader's heartbeats; the library's default is every tick.
 * Redirects are answered from the app servers' caches, so the members mostly idle, and their heartbeats (a wake-up
 * of the leader and of every follower, each way) were most of their CPU: an idle 5-member cluster used ~45 ms of
 * CPU a second with 1, ~20 with 3 (README "Members' heartbeats"). Failover is unchanged: the election timeout is
 * still 10-20 ticks, and a heartbeat every 3 leaves at least 3 in each (the simulator draws 1 to 3). Commit news,
 * read barriers and appends are sent at once either way; only an idle leader's "still here" waits 300 ms.
 */
export const MEMBER_HEARTBEAT_TICKS = 3;

export const shortlinkService: ServiceDefinition<LinkCommand, LinkResult> = {
  name: 'shortlink',
  createMachine: () => new LinkMachine(),
  routes: linkRoutes,
  raft: { heartbeatTicks: MEMBER_HEARTBEAT_TICKS },
  // Click workers first: the app servers find the stream when they start.
  workers: [...clickWorkerRoles, app],
};
export { ShortlinkClient } from './client.js';
export type { ShortlinkClientOptions, CreateLink, Link as PublicLink } from './client.js';
