/** The services a member process can host, by name. Each later service adds one line here. */
import type { ServiceDefinition } from '@raftkit/http';
import { kvService } from '@raftkit/kv';
import { lockService } from '@raftkit/lock';
import { startMember, type MemberOptions, type RunningMember } from './host.js';

/** A service with its command types erased: all the member process needs is a way to start it. */
export type HostedService = (options: MemberOptions) => Promise<RunningMember>;

function hosted<C, R>(definition: ServiceDefinition<C, R>): HostedService {
  return (options) => startMember(definition, options);
}

export const services: Record<string, HostedService> = {
  kv: hosted(kvService),
  lock: hosted(lockService),
};

export function serviceNames(): string[] {
  return Object.keys(services);
}

/** Each service's default ports, so several clusters can run side by side: raft base+1.., HTTP base+101... */
const basePorts: Record<string, number> = {
  kv: 7000,
  lock: 7200,
};

export function defaultBasePort(service: string): number {
  return basePorts[service] ?? 9000;
}
