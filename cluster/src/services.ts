/**
 * The services a cluster can run, by name, with everything needed to start their members and workers. Each later
 * service adds one line here and its base port in service-list.ts. Each service package is imported only when its
 * service is asked for: a kv member does not load the video pipeline, and starting a process stays cheap.
 */
import type { GroupedServiceDefinition, ServiceDefinition, WorkerRoles } from '@raftkit/http';
import { logHostRole } from './log-host-role.js';
import { startManyGroupsMember } from './many-groups.js';
import type { MemberOptions, RunningMember } from './member-admin.js';
import { startSingleGroupMember } from './single-group.js';
import { serviceNames } from './service-list.js';

export { serviceNames };

/** A service with its command types erased: how to start a member, and the service's other processes. */
export interface HostedService {
  member(options: MemberOptions): Promise<RunningMember>;
  workers: WorkerRoles;
  /** Node flags of every member process (ServiceDefinition.memberNodeFlags). */
  memberNodeFlags: readonly string[];
}

function hosted<C, R>(definition: ServiceDefinition<C, R>): HostedService {
  return {
    member: (options) => startSingleGroupMember(definition, options),
    workers: definition.workers ?? [],
    memberNodeFlags: definition.memberNodeFlags ?? [],
  };
}

/** A service with more worker roles started before its own (a log its workers use, see log-host-role.ts). */
function withWorkersFirst(service: HostedService, first: WorkerRoles): HostedService {
  return { ...service, workers: [...first, ...service.workers] };
}

/** A service on many Raft groups per process (each member a ManagedHost); a fresh definition per member. */
function grouped(definition: () => GroupedServiceDefinition): HostedService {
  return {
    member: (options) => startManyGroupsMember(definition(), options),
    workers: definition().workers ?? [],
    memberNodeFlags: [],
  };
}

const loaders: Record<string, () => Promise<HostedService>> = {
  kv: async () => hosted((await import('@raftkit/kv')).kvService),
  lock: async () => hosted((await import('@raftkit/lock')).lockService),
  ratelimit: async () => hosted((await import('@raftkit/ratelimit')).ratelimitService),
  shortlink: async () => {
    const { shortlinkService, CLICK_LOG_ROLE, CLICK_LOG_HOSTS } = await import('@raftkit/shortlink');
    // The click log's hosts first: the analytics workers and app servers use its topic from their start.
    return withWorkersFirst(hosted(shortlinkService), [logHostRole('shortlink', CLICK_LOG_ROLE, CLICK_LOG_HOSTS)]);
  },
  log: async () => grouped((await import('@raftkit/log')).createLogService),
  collab: async () => grouped((await import('@raftkit/collab')).createCollabService),
  flash: async () => grouped((await import('@raftkit/flash')).createFlashService),
  auction: async () => grouped((await import('@raftkit/auction')).createAuctionService),
  video: async () => hosted((await import('@raftkit/video')).videoService),
  feed: async () => grouped((await import('@raftkit/feed')).createFeedService),
  notify: async () => grouped((await import('@raftkit/notify')).createNotifyService),
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
