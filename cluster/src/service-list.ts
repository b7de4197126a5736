/**
 * The names of the services a cluster can run and their port plan, without loading the services themselves, so
 * that `cluster status`, `kill` and the rest start in a fraction of the time (services.ts imports every service
 * package; it checks at load that it serves exactly these names).
 */

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

export function serviceNames(): string[] {
  return Object.keys(basePorts);
}

export function defaultBasePort(service: string): number {
  return basePorts[service] ?? 9000;
}

/**
 * The worker role a user of each service calls (the services' READMEs), for `cluster list` and `make up`'s table;
 * a service absent here is called on its members.
 */
const entryRoles: Record<string, string> = {
  ratelimit: 'check',
  shortlink: 'app',
  collab: 'worker',
  flash: 'gateway',
  auction: 'gateway',
  video: 'app',
  feed: 'app',
};

/** The worker role users call, or undefined when they call the members. */
export function entryRole(service: string): string | undefined {
  return entryRoles[service];
}

/** The most workers one cluster may have (their ports must stay inside the base's 200-port block). */
export const MAX_WORKERS = 20;

export function workerPorts(base: number, k: number): { http: number; tcp: number } {
  return { http: base + 40 + k, tcp: base + 160 + k };
}
