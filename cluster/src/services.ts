/** The services a cluster can run, by name. Each later service adds one line here. */
import type { GroupedServiceDefinition, ServiceDefinition, WorkerRoles } from '@raftkit/http';
import { createAuctionService } from '@raftkit/auction';
import { kvService } from '@raftkit/kv';
import { createCollabService } from '@raftkit/collab';
import { createLogService } from '@raftkit/log';
import { createFeedService } from '@raftkit/feed';
import { createFlashService } from '@raftkit/flash';
import { lockService } from '@raftkit/lock';
import { createNotifyService } from '@raftkit/notify';
import { ratelimitService } from '@raftkit/ratelimit';
import { shortlinkService } from '@raftkit/shortlink';
import { videoService } from '@raftkit/video';
import { startGroupedMember } from './group-member.js';
import { startMember, type MemberOptions, type RunningMember } from './host.js';

/** A service with its command types erased: how to start a member, and the service's other processes. */
export interface HostedService {
  member(options: MemberOptions): Promise<RunningMember>;
  workers: WorkerRoles;
}

function hosted<C, R>(definition: ServiceDefinition<C, R>): HostedService {
  return { member: (options) => startMember(definition, options), workers: definition.workers ?? [] };
}

/** A service on many Raft groups per process (each member a ManagedHost); a fresh definition per member. */
function grouped(definition: () => GroupedServiceDefinition): HostedService {
  return { member: (options) => startGroupedMember(definition(), options), workers: definition().workers ?? [] };
}

export const services: Record<string, HostedService> = {
  kv: hosted(kvService),
  lock: hosted(lockService),
  ratelimit: hosted(ratelimitService),
  shortlink: hosted(shortlinkService),
  log: grouped(createLogService),
  collab: grouped(createCollabService),
  flash: grouped(createFlashService),
  auction: grouped(createAuctionService),
  video: hosted(videoService),
  feed: grouped(createFeedService),
  notify: grouped(createNotifyService),
};

export function serviceNames(): string[] {
  return Object.keys(services);
}

/**
 * Each service's default ports, so several clusters can run side by side: raft base+1.., member HTTP base+101..,
 * worker k (1-based, in start order) HTTP base+40+k and binary base+160+k.
 */
const basePorts: Record<string, number> = {
  kv: 7000,
  lock: 7200,
  ratelimit: 7400,
  shortlink: 7600,
  log: 7800,
  collab: 8000,
  flash: 8200,
  auction: 8400,
  video: 8600,
  feed: 8800,
  notify: 9200,
};

export function defaultBasePort(service: string): number {
  return basePorts[service] ?? 9000;
}

/** The most workers one cluster may have (their ports must stay inside the base's 200-port block). */
export const MAX_WORKERS = 20;

export function workerPorts(base: number, k: number): { http: number; tcp: number } {
  return { http: base + 40 + k, tcp: base + 160 + k };
}
