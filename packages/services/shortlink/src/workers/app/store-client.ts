/**
 * How an application server reaches the link store: the shared ClusterClient (a pool per member, a preferred
 * member spread by app index for reads, the leader for writes, failover on 503 or a dead member), with its
 * "cluster unreachable" turned into this service's 503 answer.
 */
import {
  clusterUrl,
  ClusterClient,
  ServiceError,
  unavailable,
  type ClusterAnswer,
  type PeerAddress,
} from '@raftkit/http';

export type StoreAnswer = ClusterAnswer;

export class LinkStoreClient {
  private readonly client: ClusterClient;

  constructor(members: readonly PeerAddress[], token: string, preferred: number) {
    if (members.length === 0) throw new TypeError('the link store needs at least one member');
    this.client = new ClusterClient({
      endpoints: members.map((m) => clusterUrl(m.httpAddress)),
      ids: members.map((m) => m.id),
      token,
      preferred,
      timeoutMs: 10_000,
    });
  }

  /** One call, failed over across members until `timeoutMs`; then a 503 HttpError. Other answers as they are. */
  async call(method: 'GET' | 'POST' | 'DELETE', path: string, body?: object, timeoutMs = 10_000): Promise<StoreAnswer> {
    try {
      return await this.client.request(method, path, body, { timeoutMs });
    } catch (error) {
      if (error instanceof ServiceError && error.status === 503)
        throw unavailable(`the link store is unreachable: ${error.message}`, 1);
      throw error;
    }
  }

  close(): Promise<void> {
    return this.client.close();
  }
}
