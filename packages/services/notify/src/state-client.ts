/**
 * How workers (and members, for groups they do not hold) reach the state groups: commands and queries through the
 * members' internal endpoints, routed to the group's leader by GroupRouter (421s and elections handled there).
 */
import { GroupClient, GroupRouter } from '@raftkit/http';
import type { NotifyCommand, NotifyResult } from './machine.js';
import type { StateQuery } from './queries.js';

/** The state groups' command route (members register it, StateClient calls it). */
export const STATE_COMMAND_ROUTE = '/v1/notify/groups/:group/commands';

export class StateClient {
  readonly router: GroupRouter;
  private readonly commands: GroupClient<NotifyCommand, NotifyResult>;

  constructor(options: { endpoints: string[]; token: string; timeoutMs?: number }) {
    this.router = new GroupRouter({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 15_000,
    });
    this.commands = new GroupClient(this.router, STATE_COMMAND_ROUTE);
  }

  async command(
    group: string,
    command: NotifyCommand,
    options: { token?: string; timeoutMs?: number } = {},
  ): Promise<NotifyResult> {
    return this.commands.command(group, command, callOptions(options));
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
