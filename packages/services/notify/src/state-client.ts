/**
 * How workers (and members, for groups they do not hold) reach the state groups: commands and queries through the
 * members' internal endpoints, routed to the group's leader by GroupRouter (421s and elections handled there).
 */
import { GroupRouter } from '@raftkit/http';
import type { NotifyCommand, NotifyResult } from './machine.js';
import type { StateQuery } from './queries.js';

export class StateClient {
  readonly router: GroupRouter;

  constructor(options: { endpoints: string[]; token: string; timeoutMs?: number }) {
    this.router = new GroupRouter({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 15_000,
    });
  }

  async command(
    group: string,
    command: NotifyCommand,
    options: { token?: string; timeoutMs?: number } = {},
  ): Promise<NotifyResult> {
    return (await this.router.call(
      group,
      'POST',
      `/v1/notify/groups/${encodeURIComponent(group)}/commands`,
      command,
      callOptions(options),
    )) as NotifyResult;
  }

  async query<T>(group: string, query: StateQuery, options: { token?: string; timeoutMs?: number } = {}): Promise<T> {
    return (await this.router.call(
      group,
      'POST',
      `/v1/notify/groups/${encodeURIComponent(group)}/query`,
      query,
      callOptions(options),
    )) as T;
  }

  close(): Promise<void> {
    return this.router.close();
  }
}

function callOptions(options: { token?: string; timeoutMs?: number }): {
  headers?: Record<string, string>;
  timeoutMs?: number;
} {
  return {
    ...(options.token !== undefined ? { headers: { authorization: `Bearer ${options.token}` } } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  };
}
