/**
 * The services a cluster can run, by name, with everything needed to start their members and workers. Each later
 * service adds one line here and its base port in service-list.ts. Each service package is imported only when its
 * service is asked for: a kv member does not load the video pipeline, and starting a process stays cheap.
 */
import { oneGroupKind, type ServiceDefinition, type WorkerRoles } from '@raftkit/http';
import { logHostRole } from './log-host-role.js';
import { startManyGroupsMember } from './many-groups.js';
import type { MemberOptions, RunningMember } from './member-admin.js';
import { startSingleGroupMember } from './single-group.js';
import { serviceNames } from './service-list.js';

export { serviceNames };

/** A service with its command types erased: how to start a member, and the service's other processes. */
interface HostedService {
  member(options: MemberOptions): Promise<RunningMember>;
  workers: WorkerRoles;
  /** Node flags of every member process (ServiceDefinition.memberNodeFlags). */
  memberNodeFlags: readonly string[];
  /** Whether its groups are created on request (a replica count applies), rather than one group on every member. */
  grouped: boolean;
}

/**
 * A service's member and workers. The member process runs its groups as its kinds declare: a 'one group' kind as
 * a RaftNode of its own (single-group.ts), kinds provisioned on request in a ManagedHost (many-groups.ts). A
 * definition given as a function is made afresh for each member (it may hold per-member state, as the auction's
 * parts do).
 */
function hosted<C, R>(given: ServiceDefinition<C, R> | (() => ServiceDefinition<C, R>)): HostedService {
  const definition = typeof given === 'function' ? given : () => given;
  const declared = definition();
  const one = oneGroupKind(declared.kinds) !== null;
  return {
    member: (options) =>
      one
        ? startSingleGroupMember(definition(), options)
        : startManyGroupsMember(definition() as ServiceDefinition, options),
    workers: declared.workers ?? [],
    memberNodeFlags: declared.memberNodeFlags ?? [],
    grouped: !one,
  };
}

/** A service with more worker roles started before its own (a log its workers use, see log-host-role.ts). */
function withWorkersFirst(service: HostedService, first: WorkerRoles): HostedService {
  return { ...service, workers: [...first, ...service.workers] };
}

const loaders: Record<string, () => Promise<HostedService>> = {
  kv: async () => hosted((await import('@raftkit/kv')).kvService),
  lock: async () => hosted((await import('@raftkit/lock')).lockService),
  ratelimit: async () => hosted((await import('@raftkit/ratelimit')).ratelimitService),
  shortlink: async () => {
    const { shortlinkService, CLICK_LOG_ROLE, CLICK_LOG_HOSTS } = await import('@raftkit/shortlink');
    // The click log's hosts start first (the analytics workers and app servers use its topic from their start)
    // and take places 11 on, so the roles that were there before keep their ports.
    return withWorkersFirst(hosted(shortlinkService), [logHostRole('shortlink', CLICK_LOG_ROLE, CLICK_LOG_HOSTS, 11)]);
  },
  log: async () => hosted((await import('@raftkit/log')).createLogService),
  collab: async () => hosted((await import('@raftkit/collab')).createCollabService),
  flash: async () => hosted((await import('@raftkit/flash')).createFlashService),
  auction: async () => hosted((await import('@raftkit/auction')).createAuctionService),
  video: async () => hosted((await import('@raftkit/video')).videoService),
  feed: async () => hosted((await import('@raftkit/feed')).createFeedService),
  notify: async () => hosted((await import('@raftkit/notify')).createNotifyService),
};

/** The service of that name, its package loaded now; undefined for a name no service has. */
export async function loadService(name: string): Promise<HostedService | undefined> {
  return Object.hasOwn(loaders, name) ? loaders[name]!() : undefined;
}

// The light list (service-list.ts) names the same services, so that the CLI can start without loading them all.
const missing = serviceNames().filter((name) => !Object.hasOwn(loaders, name));
const unlisted = Object.keys(loaders).filter((name) => !serviceNames().includes(name));
if (missing.length > 0 || unlisted.length > 0)
  throw new Error(
    `service-list.ts and services.ts disagree: missing ${missing.join(',')} unlisted ${unlisted.join(',')}`,
  );
