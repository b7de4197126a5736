/**
 * The client-side router of a service on many Raft groups: it sends each call about a group straight to the member
 * leading that group. It learns hosts' URLs from GET /v1/cluster/hosts, a group's leader from the `raft-leader`
 * header of every answer about it, and the members holding a group from a 421 `misdirected` answer; it caches
 * all three, and on a 503 or a connection failure it forgets the leader and tries the group's other members, then
 * any member, with backoff, until the deadline.
 *
 * Keys: `groupOf(key)` maps a key to the group serving it, from the meta group's catalogue (GET
 * /v1/cluster/catalog, cached, fetched again when a key maps to no group), with `locate`: by default the group
 * whose `data.slots` range [first, last] holds the key's hash slot (`hashSlot`, 0..16383). `callKey` routes a
 * call by key.
 */
import { Pool } from 'undici';
import { connectOptions } from './tls.js';
import { ServiceError, answerError, errorCodeOf, memberSessionLapsed, type ClusterAnswer } from './client.js';
import { GROUP_LEADER_HEADER } from './service.js';

/** Hash slots keys are spread over (as Redis Cluster's 16,384). */
export const HASH_SLOTS = 16_384;

/** A key's hash slot: FNV-1a (32 bits) of its UTF-8 bytes, modulo HASH_SLOTS. */
export function hashSlot(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % HASH_SLOTS;
}

/** A group as the meta group's catalogue lists it. */
export interface RouterGroup {
  name: string;
  /** Host ids holding it. */
  members: string[];
  /** What it serves (a hash-slot range, a topic's partition...), as recorded when it was created. */
  data: Record<string, unknown>;
}

/** The group serving `key` among `groups`, or null. */
export type GroupLocator = (key: string, groups: readonly RouterGroup[]) => string | null;

/** The default locator: the group whose `data.slots` is a range [first, last] holding the key's hash slot. */
export const locateBySlot: GroupLocator = (key, groups) => {
  const slot = hashSlot(key);
  for (const g of groups) {
    const range = g.data.slots;
    if (
      Array.isArray(range) &&
      typeof range[0] === 'number' &&
      typeof range[1] === 'number' &&
      range[0] <= slot &&
      slot <= range[1]
    )
      return g.name;
  }
  return null;
};

/** What a router did so far (for tests and tools). */
export interface GroupRouterStats {
  /** HTTP requests sent. */
  requests: number;
  /** 421 answers followed (the member did not hold the group). */
  misdirected: number;
  /** Times the leader named by an answer differed from the one cached. */
  leaderChanges: number;
  /** Catalogue fetches. */
  catalogFetches: number;
}

export interface GroupRouterOptions {
  /** Base URLs of some members (any one is enough to start), e.g. http://127.0.0.1:7101 */
  endpoints: string[];
  token: string;
  /** Give up after this long per call. Default 15 s. */
  timeoutMs?: number;
  /** Connections per member. Default 16. */
  connections?: number;
  /** Maps a key to its group (`groupOf`). Default `locateBySlot`. */
  locate?: GroupLocator;
  /** PEM of the CA https members' certificates are checked against. Default: the process's (useClusterTls), else the system's. */
  ca?: string | Buffer;
}

interface Route {
  leader: string | null;
  members: string[];
}

export class GroupRouter {
  readonly timeoutMs: number;
  private readonly pools = new Map<string, Pool>();
  private readonly routes = new Map<string, Route>();
  /** Host id -> base URL. */
  private hosts = new Map<string, string>();
  private hostsFetched = 0;
  private next = 0;
  private closed = false;
  private catalog: RouterGroup[] | null = null;
  private catalogFetched = 0;
  readonly stats: GroupRouterStats = { requests: 0, misdirected: 0, leaderChanges: 0, catalogFetches: 0 };

  constructor(private readonly options: GroupRouterOptions) {
    if (options.endpoints.length === 0) throw new TypeError('at least one endpoint is needed');
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  /** The leader URL cached for a group, if any (for tests and tools). */
  leaderOf(group: string): string | null {
    const leader = this.routes.get(group)?.leader ?? null;
    return leader === null ? null : (this.hosts.get(leader) ?? null);
  }

  /**
   * The group serving `key` (see `locate`), from the cached catalogue; when no group serves it, the catalogue is
   * fetched again (at most once a second) before a 404 `group_not_found` ServiceError.
   */
  async groupOf(key: string): Promise<string> {
    const locate = this.options.locate ?? locateBySlot;
    if (this.catalog !== null) {
      const found = locate(key, this.catalog);
      if (found !== null) return found;
    }
    await this.refreshCatalog(this.catalog === null);
    const found = this.catalog === null ? null : locate(key, this.catalog);
    if (found === null)
      throw new ServiceError(404, 'group_not_found', `no group serves key ${JSON.stringify(key).slice(0, 100)}`, null);
    return found;
  }

  /** `call` about the group serving `key`. */
  async callKey(
    key: string,
    method: string,
    path: string,
    body?: object | string,
    options: { headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<unknown> {
    return this.call(await this.groupOf(key), method, path, body, options);
  }

  /**
   * Every group of the meta group's catalogue as a member sees it now (fetched, and cached for `groupOf`), for a call
   * to every group of a service; the last catalogue known when no member answers.
   */
  async groups(): Promise<RouterGroup[]> {
    await this.refreshCatalog(true);
    return this.catalog ?? [];
  }

  /** Forget the cached catalogue (the next `groupOf` fetches it). */
  invalidateCatalog(): void {
    this.catalog = null;
  }

  /** The body of a 2xx answer about `group`; any other final answer is a ServiceError. */
  async call(
    group: string,
    method: string,
    path: string,
    body?: object | string,
    options: { headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<unknown> {
    const answer = await this.request(group, method, path, body, options);
    if (answer.status < 300) return answer.body;
    throw answerError(answer);
  }

  /**
   * One call about `group`, routed and retried as the class says; any answer but 421 and 503 is returned, and a 404
   * `group_not_found` only once every member asked has said so when the catalogue names the group (a member that
   * has just restarted answers it until its meta group has applied the group's creation).
   */
  async request(
    group: string,
    method: string,
    path: string,
    body?: object | string,
    options: { headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<ClusterAnswer> {
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    const payload = body === undefined || typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.token}`, ...options.headers };
    if (typeof body === 'object') headers['content-type'] = 'application/json';
    let last = 'no member answered in time';
    let lastBody: unknown = null;
    const tried = new Set<string>();
    const notFoundBy = new Set<string>();
    let lapsedSessions = 0;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      if (this.closed) throw new ServiceError(503, 'unavailable', 'the router is closed', null);
      const url = await this.target(group, tried);
      tried.add(url);
      try {
        const answer = await this.once(url, method, path, payload, headers, deadline - Date.now());
        this.learnLeader(group, answer.leader);
        // A leader whose URL is not known yet: learn it now, so the next call goes straight there.
        if (answer.leader !== null && !this.hosts.has(answer.leader)) await this.refreshHosts();
        if (lapsedSessions < 1 && memberSessionLapsed(answer, headers)) {
          lapsedSessions++;
          tried.delete(url); // the same member again: it registers a fresh session for the retry
          continue;
        }
        if (answer.status === 421) {
          this.stats.misdirected++;
          this.learnMembers(group, answer.body);
          last = 'misdirected';
          continue;
        }
        if (answer.status === 404 && errorCodeOf(answer.body) === 'group_not_found' && this.knows(group)) {
          notFoundBy.add(url);
          if (notFoundBy.size >= this.candidates(group).length) return { status: answer.status, body: answer.body };
          last = `a member does not know the group yet: ${JSON.stringify(answer.body).slice(0, 200)}`;
          lastBody = answer.body;
        } else if (answer.status !== 503) {
          return { status: answer.status, body: answer.body };
        } else {
          last = `a member answered 503: ${JSON.stringify(answer.body).slice(0, 200)}`;
          lastBody = answer.body;
        }
      } catch (error) {
        last = String((error as Error).message ?? error);
      }
      const route = this.routes.get(group);
      if (route !== undefined) route.leader = null;
      // Every candidate tried once: wait a little (an election takes a moment) and start over.
      if (tried.size >= this.candidates(group).length) {
        tried.clear();
        await sleep(Math.min(500, 25 * 2 ** Math.min(attempt, 5), Math.max(0, deadline - Date.now())));
      }
    }
    throw new ServiceError(503, 'unavailable', `group ${group} is unreachable (${last})`, lastBody);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.pools.values()].map((p) => p.close()));
  }

  /** Whether the catalogue this router fetched (or a member's 421) names the group. */
  private knows(group: string): boolean {
    return (this.catalog?.some((g) => g.name === group) ?? false) || (this.routes.get(group)?.members.length ?? 0) > 0;
  }

  private candidates(group: string): string[] {
    const route = this.routes.get(group);
    const members = route?.members ?? [];
    return members.length > 0 ? members : [...new Set([...this.options.endpoints, ...this.hosts.values()])];
  }

  /** The leader when known and untried, else a member of the group not tried yet, else any member round robin. */
  private async target(group: string, tried: Set<string>): Promise<string> {
    const route = this.routes.get(group);
    if (route?.leader != null) {
      if (!this.hosts.has(route.leader)) await this.refreshHosts();
      const url = this.hosts.get(route.leader);
      if (url !== undefined && !tried.has(url)) return url;
    }
    const candidates = this.candidates(group);
    const untried = candidates.filter((u) => !tried.has(u));
    const pool = untried.length > 0 ? untried : candidates;
    return pool[this.next++ % pool.length]!;
  }

  private learnLeader(group: string, leader: string | null): void {
    if (leader === null) return;
    const route = this.routes.get(group) ?? { leader: null, members: [] };
    if (route.leader !== null && route.leader !== leader) this.stats.leaderChanges++;
    route.leader = leader;
    this.routes.set(group, route);
  }

  private learnMembers(group: string, body: unknown): void {
    const members = (body as { error?: { members?: Array<{ id?: unknown; url?: unknown }> } } | null)?.error?.members;
    if (!Array.isArray(members)) return;
    const urls: string[] = [];
    for (const m of members) {
      if (typeof m.id === 'string' && typeof m.url === 'string') {
        this.hosts.set(m.id, m.url);
        urls.push(m.url);
      }
    }
    const route = this.routes.get(group) ?? { leader: null, members: [] };
    route.members = urls;
    this.routes.set(group, route);
  }

  /** Host ids to URLs, from any member (at most once a second). */
  private async refreshHosts(): Promise<void> {
    if (Date.now() - this.hostsFetched < 1000) return;
    this.hostsFetched = Date.now();
    for (const url of this.options.endpoints) {
      try {
        const answer = await this.once(
          url,
          'GET',
          '/v1/cluster/hosts',
          undefined,
          { authorization: `Bearer ${this.options.token}` },
          2000,
        );
        const hosts = (answer.body as { hosts?: Array<{ id: string; http: string | null }> } | null)?.hosts;
        if (answer.status === 200 && Array.isArray(hosts)) {
          for (const h of hosts) if (typeof h.http === 'string') this.hosts.set(h.id, h.http);
          return;
        }
      } catch {
        // Try the next endpoint.
      }
    }
  }

  /** The catalogue from any member (at most once a second unless `force`). */
  private async refreshCatalog(force: boolean): Promise<void> {
    if (!force && Date.now() - this.catalogFetched < 1000) return;
    this.catalogFetched = Date.now();
    const headers = { authorization: `Bearer ${this.options.token}` };
    const endpoints = [...new Set([...this.options.endpoints, ...this.hosts.values()])];
    let last = 'no member answered';
    for (let i = 0; i < endpoints.length; i++) {
      const url = endpoints[(this.next++ + i) % endpoints.length]!;
      try {
        this.stats.catalogFetches++;
        const answer = await this.once(
          url,
          'GET',
          '/v1/cluster/catalog',
          undefined,
          headers,
          Math.min(this.timeoutMs, 5000),
        );
        const groups = (answer.body as { groups?: unknown } | null)?.groups;
        if (answer.status === 200 && Array.isArray(groups)) {
          this.catalog = groups.filter(isRouterGroup).map((g) => ({ name: g.name, members: g.members, data: g.data }));
          return;
        }
        last = `${url} answered ${answer.status}`;
      } catch (error) {
        last = String((error as Error).message ?? error);
      }
    }
    if (this.catalog === null)
      throw new ServiceError(503, 'unavailable', `the group catalogue is unreachable (${last})`, null);
  }

  private pool(url: string): Pool {
    let pool = this.pools.get(url);
    if (pool === undefined) {
      pool = new Pool(url, {
        connections: this.options.connections ?? 16,
        keepAliveTimeout: 30_000,
        ...connectOptions(this.options.ca),
      });
      this.pools.set(url, pool);
    }
    return pool;
  }

  private async once(
    url: string,
    method: string,
    path: string,
    payload: string | undefined,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<ClusterAnswer & { leader: string | null }> {
    this.stats.requests++;
    const res = await this.pool(url).request({
      method: method as 'GET',
      path,
      headers,
      body: payload,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    const leader = res.headers[GROUP_LEADER_HEADER];
    let body: unknown = null;
    if (text.length > 0) {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    return { status: res.statusCode, body, leader: typeof leader === 'string' ? leader : null };
  }
}

function isRouterGroup(g: unknown): g is RouterGroup {
  const r = g as Partial<RouterGroup> | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.name === 'string' &&
    Array.isArray(r.members) &&
    typeof r.data === 'object' &&
    r.data !== null
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
