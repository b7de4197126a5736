/**
 * In-memory watches on this member: long polls and server-sent-event streams, fed by the state machine's change
 * notifications as entries are applied. Hints only: a lost watch costs a re-watch, never correctness.
 */
import type { ServerResponse } from 'node:http';
import type { LockChange, LockState } from './machine.js';

export interface WatchFilter {
  /** Fire only on changes that grant this session the lock or take it away (so only the head is woken). */
  session: string | null;
}

interface Waiter {
  filter: WatchFilter;
  fire: (change: LockChange) => void;
}

export class WatchHub {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly streams = new Set<ServerResponse>();

  publish = (change: LockChange): void => {
    const set = this.waiters.get(change.lock.name);
    if (set === undefined) return;
    for (const w of [...set]) {
      if (w.filter.session !== null && change.granted !== w.filter.session && change.lost !== w.filter.session) continue;
      w.fire(change);
    }
  };

  /** Wait for the next matching change of `name`, or null after `timeoutMs`. */
  next(name: string, filter: WatchFilter, timeoutMs: number): Promise<LockChange | null> {
    return new Promise((resolve) => {
      const set = this.waiters.get(name) ?? new Set();
      this.waiters.set(name, set);
      const waiter: Waiter = {
        filter,
        fire: (change) => {
          done();
          resolve(change);
        },
      };
      const timer = setTimeout(() => {
        done();
        resolve(null);
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        set.delete(waiter);
        if (set.size === 0) this.waiters.delete(name);
      };
      set.add(waiter);
    });
  }

  /** Stream every matching change of `name` as server-sent events until the client goes away. */
  stream(name: string, filter: WatchFilter, res: ServerResponse, initial: LockState): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (event: string, data: unknown): void => {
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    send('state', lockBody(initial));
    const set = this.waiters.get(name) ?? new Set();
    this.waiters.set(name, set);
    const waiter: Waiter = { filter, fire: (change) => send('change', changeBody(change)) };
    set.add(waiter);
    this.streams.add(res);
    // Comments keep proxies from closing an idle stream.
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    res.on('close', () => {
      clearInterval(keepAlive);
      set.delete(waiter);
      if (set.size === 0) this.waiters.delete(name);
      this.streams.delete(res);
    });
  }

  close(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
  }
}

export function lockBody(lock: LockState): Record<string, unknown> {
  return {
    name: lock.name,
    holder_session: lock.holder,
    fencing_token: lock.token,
    queue_length: lock.queue.length,
    revision: lock.revision,
  };
}

export function changeBody(change: LockChange): Record<string, unknown> {
  return { lock: lockBody(change.lock), granted_session: change.granted, released_session: change.lost };
}
