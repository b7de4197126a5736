/**
 * @raftkit/shortlink: the short-link service. Raft members run the link store (ids, links); "app" workers serve
 * the public API and redirects; the click workers (src/workers/clicks) log and count clicks. README.md has the contract.
 */
import { IDLE_MEMBER_HEARTBEAT_TICKS, IDLE_MEMBERS, type ServiceDefinition } from '@raftkit/http';
import { linkRoutes } from './members/api.js';
import { appRole } from './workers/app/app.js';
import {
  analyticsReplicas,
  ClickEmitter,
  clickPartitions,
  clickWorkerRoles,
  countryOf,
  fetchStats,
} from './workers/clicks/index.js';
import { LinkMachine, type LinkCommand, type LinkResult } from './machine.js';

export { LinkMachine, LEASE_SIZE } from './machine.js';
export type { Link, LinkCommand, LinkResult, LinkChange, CreateSpec, CreateOutcome } from './machine.js';
export { linkRoutes } from './members/api.js';
export type { LinkRecord, BatchItemResult } from './members/api.js';
export { appRole, startApp, DEFAULT_APP_COUNT } from './workers/app/app.js';
export type { Click, ClickSide } from './workers/app/app.js';
export {
  permute,
  unpermute,
  encodeBase62,
  decodeBase62,
  codeForId,
  idForCode,
  ID_SPACE,
  RESERVED_CODES,
} from './codes.js';

/** The app server's click side: the emitter into the click log, GeoIP and analytics. */
const app = appRole({
  emitter: (options, metrics) =>
    new ClickEmitter({
      workers: options.workers,
      token: options.tokens[0]!,
      settings: options.settings,
      logger: options.logger,
      metrics,
    }),
  countryOf,
  stats: (options, code) =>
    fetchStats(
      {
        workers: options.workers,
        token: options.tokens[0]!,
        partitions: clickPartitions(options.settings),
        replicas: analyticsReplicas(options.settings),
      },
      code,
    ),
});

/** The link store members' heartbeat interval in ticks: @raftkit/http IDLE_MEMBERS (redirects are served from caches). */
export const MEMBER_HEARTBEAT_TICKS = IDLE_MEMBER_HEARTBEAT_TICKS;

export const shortlinkService: ServiceDefinition<LinkCommand, LinkResult> = {
  name: 'shortlink',
  kinds: [
    {
      name: 'links',
      provisioning: 'one group',
      createMachine: () => new LinkMachine(),
      raft: IDLE_MEMBERS.raft,
      replicas: 'every member',
    },
  ],
  routes: linkRoutes,
  // Click workers first (after the click log's hosts, which the cluster starts before every other worker).
  workers: [...clickWorkerRoles, app],
};
export { CLICK_LOG_ROLE, CLICK_LOG_HOSTS, CLICK_TOPIC } from './workers/clicks/index.js';
export { ShortlinkClient } from './client.js';
export type { ShortlinkClientOptions, CreateLink, Link as PublicLink } from './client.js';
