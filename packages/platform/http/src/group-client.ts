/**
 * A typed client for the command route of a service's groups: the route a member registers with
 * ServiceContext.commandRoute (`/v1/collab/groups/:group/commands`), called by the workers and clients that write
 * to a group they do not hold. The command goes through a GroupRouter (to the group's leader, 421s followed,
 * elections waited out until the deadline) and its result comes back as the machine's result type, so the route's
 * path and the cast are written once, beside the route, rather than in every caller.
 */
import type { ClusterAnswer, RequestOptions } from './client.js';
import type { GroupRouter } from './group-router.js';

export class GroupClient<C extends object, R> {
  /**
   * @param router the router calls go through (shared with the caller's other calls about the same groups).
   * @param route the command route as the members register it, with `:group` where the group's name goes.
   */
  constructor(
    readonly router: GroupRouter,
    readonly route: string,
  ) {
    if (route.split(':group').length !== 2) throw new TypeError(`${route}: a command route names :group once`);
  }

  /** The route's path for `group`. */
  path(group: string): string {
    return this.route.replace(':group', encodeURIComponent(group));
  }

  /** Apply `command` through the group's log: its result, or a ServiceError with the final answer's status and code. */
  async command(group: string, command: C, options: RequestOptions = {}): Promise<R> {
    return (await this.router.call(group, 'POST', this.path(group), command, options)) as R;
  }

  /** `command`'s final answer whatever its status (GroupRouter.request), for a caller that handles some itself. */
  request(group: string, command: C, options: RequestOptions = {}): Promise<ClusterAnswer> {
    return this.router.request(group, 'POST', this.path(group), command, options);
  }
}
