/**
 * A typed client of the short-link service's public surface (the app servers): create, read, delete and count
 * links, issue API keys, and resolve a code as a browser would (the 302's Location). On ClusterClient
 * (packages/platform/http): a keep-alive pool per app server and failover while one does not answer or answers 503.
 */
import { ClusterClient, ServiceError } from '@raftkit/http';

export interface ShortlinkClientOptions {
  /** App server base URLs, e.g. http://127.0.0.1:7641 */
  endpoints: string[];
  /** An API key (`client.<user>...`) or the cluster token. */
  token: string;
  timeoutMs?: number;
}

export interface CreateLink {
  long_url: string;
  /** 8 to 64 of A-Z a-z 0-9 _ - */
  custom_alias?: string;
  /** An ISO-8601 timestamp with a zone or a duration (P30D); absent: 5 years. */
  expiry?: string | null;
}

export interface Link {
  short_url: string;
  short_code: string;
  long_url: string;
  created_at: string;
  expires_at: string;
  /** Only in reads (GET /api/urls/{code}). */
  created_by?: string;
}

export class ShortlinkClient {
  private readonly cluster: ClusterClient;

  constructor(options: ShortlinkClientOptions) {
    this.cluster = new ClusterClient({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 15_000,
    });
  }

  async create(link: CreateLink): Promise<Link> {
    return (await this.cluster.call('POST', '/api/urls', link)) as Link;
  }

  async get(code: string): Promise<Link> {
    return (await this.cluster.call('GET', `/api/urls/${encodeURIComponent(code)}`)) as Link;
  }

  async stats(code: string): Promise<unknown> {
    return this.cluster.call('GET', `/api/urls/${encodeURIComponent(code)}/stats`);
  }

  async delete(code: string): Promise<{ short_code: string; deleted: true }> {
    return (await this.cluster.call('DELETE', `/api/urls/${encodeURIComponent(code)}`)) as {
      short_code: string;
      deleted: true;
    };
  }

  /** An API key for `user` (the cluster token only). */
  async issueKey(user: string): Promise<{ user: string; api_key: string }> {
    return (await this.cluster.call('POST', '/api/keys', { user })) as { user: string; api_key: string };
  }

  /** Where the code redirects (the 302's Location); a ServiceError 404 for no live link. */
  async resolve(code: string): Promise<string> {
    const answer = await this.cluster.request('GET', `/${encodeURIComponent(code)}`);
    const location = answer.headers?.location;
    if (answer.status === 302 && typeof location === 'string') return location;
    const err = (answer.body as { error?: { code?: string; message?: string } } | null)?.error;
    throw new ServiceError(answer.status, err?.code ?? 'unknown', err?.message ?? `HTTP ${answer.status}`, answer.body);
  }

  close(): Promise<void> {
    return this.cluster.close();
  }
}
