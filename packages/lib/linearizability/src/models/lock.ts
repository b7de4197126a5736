import type { Model } from '../model.js';
import { fromNondeterministic, type NondeterministicModel } from '../nondeterministic.js';
import { keyedModel, type KeyedState } from './keyed.js';

/**
 * Operations on named locks held by client sessions, with fencing tokens.
 * `acquire` does not wait: it is granted at once or refused.
 */
export type LockInput =
  | { readonly op: 'acquire'; readonly lock: string; readonly session: string }
  | { readonly op: 'release'; readonly lock: string; readonly session: string; readonly token: number }
  | { readonly op: 'read'; readonly lock: string };

/**
 * What a client observed; a missing field means "not observed".
 * - acquire: `granted`, and `token` when granted;
 * - release: `released` (false: refused because the session does not hold the lock under that token);
 * - read: the current `holder` (null when free) and `token` (that of the last grant, 0 before any).
 */
export interface LockOutput {
  readonly granted?: boolean;
  readonly token?: number;
  readonly released?: boolean;
  readonly holder?: string | null;
}

/** One lock: who holds it, the token of its last grant, and the sessions known to have ended. */
export interface LockState {
  readonly holder: string | null;
  readonly token: number;
  /** Sessions that ended (expired or closed) while this model tracked them, sorted. */
  readonly ended: readonly string[];
}

export interface LockModelOptions {
  /**
   * Sessions may end without any client operation (the service expires a
   * session whose heartbeats stop, or a client closes it), which frees its
   * locks. When true (the default) the model lets the holder's session end
   * at any moment between operations; a session that ended never succeeds
   * at anything again. Turn it off for services whose locks are only ever
   * released explicitly.
   */
  readonly sessionsMayEnd?: boolean;
}

const FREE: LockState = { holder: null, token: 0, ended: [] };

/**
 * The sequential specification of one lock with fencing tokens, as a
 * nondeterministic model (the holder's session may end at any time):
 *
 * - `acquire(s)`: a free lock is granted to `s` with the next token (the last
 *   one plus exactly 1); acquiring a lock one already holds returns the
 *   current grant again (so a retried acquire is harmless); a lock held by
 *   another session is refused.
 * - `release(s, t)`: succeeds only when `s` holds the lock under token `t`;
 *   the lock becomes free and keeps its token. Anything else is refused and
 *   changes nothing.
 * - `read`: the holder and the token of the last grant.
 * - A session that ended answers nothing any more: an observed result from it
 *   is impossible (the service answers `unknown_session`, which a history
 *   records as a failure, i.e. an operation that did not happen).
 */
export function singleLockModel(
  options: LockModelOptions = {},
): NondeterministicModel<LockState, LockInput, LockOutput> {
  const sessionsMayEnd = options.sessionsMayEnd ?? true;
  const apply = (state: LockState, input: LockInput, output: LockOutput | undefined): LockState[] => {
    if (input.op === 'read') {
      if (output?.holder !== undefined && output.holder !== state.holder) return [];
      if (output?.token !== undefined && output.token !== state.token) return [];
      return [state];
    }
    if (state.ended.includes(input.session)) return output === undefined ? [state] : [];
    if (input.op === 'acquire') {
      if (state.holder === null || state.holder === input.session) {
        const token = state.holder === null ? state.token + 1 : state.token;
        if (output?.granted === false) return [];
        if (output?.token !== undefined && output.token !== token) return [];
        return [{ holder: input.session, token, ended: state.ended }];
      }
      return output?.granted === true ? [] : [state];
    }
    const holds = state.holder === input.session && state.token === input.token;
    if (holds) return output?.released === false ? [] : [{ holder: null, token: state.token, ended: state.ended }];
    return output?.released === true ? [] : [state];
  };
  return {
    init: () => [FREE],
    step(state, input, output) {
      const before = [state];
      if (sessionsMayEnd && state.holder !== null) {
        before.push({ holder: null, token: state.token, ended: [...state.ended, state.holder].sort() });
      }
      return before.flatMap((candidate) => apply(candidate, input, output));
    },
    key: (state) => JSON.stringify([state.holder, state.token, state.ended]),
    describeOperation: describeLockOperation,
    describeState: (state) =>
      `${state.holder === null ? 'free' : `held by ${state.holder}`}, token ${state.token}` +
      (state.ended.length > 0 ? `, ended sessions ${state.ended.join(' ')}` : ''),
  };
}

/**
 * Named locks with fencing tokens: {@link singleLockModel} per lock name,
 * partitioned by name. Sessions ending is modelled per lock, so a session
 * that ended for one lock may still act on another: a little more permissive
 * than the service (never less), the price of checking locks independently.
 */
export function lockModel(
  options: LockModelOptions = {},
): Model<KeyedState<readonly LockState[]>, LockInput, LockOutput> {
  return keyedModel(fromNondeterministic(singleLockModel(options)), (input) => input.lock);
}

function describeLockOperation(input: LockInput, output: LockOutput | undefined): string {
  switch (input.op) {
    case 'acquire': {
      const result =
        output?.granted === undefined ? '?' : output.granted ? `granted, token ${output.token ?? '?'}` : 'refused';
      return `acquire(${input.lock}, ${input.session}) -> ${result}`;
    }
    case 'release': {
      const result = output?.released === undefined ? '?' : output.released ? 'released' : 'refused';
      return `release(${input.lock}, ${input.session}, token ${input.token}) -> ${result}`;
    }
    case 'read': {
      const holder = output?.holder === undefined ? '?' : output.holder === null ? 'free' : output.holder;
      return `read(${input.lock}) -> ${holder}, token ${output?.token ?? '?'}`;
    }
  }
}
