/**
 * The lock service's replicated state machine: sessions, locks with fencing tokens and wait queues. Pure and
 * deterministic: time comes only from the entry (leader-stamped), ids come in the commands (made at the edge).
 *
 * Invariants (checked by tests): a lock has at most one holder; a lock's fencing token increases by exactly one
 * on every grant and never decreases (it survives the lock falling free, snapshots and restores); a session in
 * a wait queue exists; a session's owned locks name it as holder.
 */
import { Packr } from 'msgpackr';
import {
  batchCommandsField,
  booleanField,
  commandOf,
  integerField,
  nullableIntegerField,
  stringArrayField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';

export type LockCommand =
  | { op: 'openSession'; id: string; timeoutMs: number; owner: string }
  | { op: 'heartbeat'; id: string; owner: string }
  | { op: 'closeSession'; id: string; owner: string }
  /** Proposed by the leader when its clock says these sessions are past their deadline; re-checked here. */
  | { op: 'expire'; ids: string[] }
  /** Proposed by a new leader before it expires anything: no session expires because of a failover. */
  | { op: 'extendAll' }
  | { op: 'acquire'; name: string; session: string; owner: string; wait: boolean }
  /** `token` null: leave the wait queue without holding the lock. */
  | { op: 'release'; name: string; session: string; owner: string; token: number | null }
  /**
   * Acquires and releases gathered from one turn of a member's event loop (src/members/batch.ts), applied in order exactly
   * as the same commands in consecutive entries would be, except that they share the entry's index and time. The
   * batcher never puts two commands on one lock name in a batch, so a lock's revision still names one change.
   */
  | { op: 'batch'; commands: BatchableCommand[] };

/** The commands a batch may carry: the hot path of a lock's life. */
export type BatchableCommand = Extract<LockCommand, { op: 'acquire' | 'release' }>;

/** The most commands one batch carries. */
export const MAX_BATCH_COMMANDS = 1_000;

export type LockError = 'unknown_session' | 'session_forbidden' | 'stale_token' | 'not_holder';

export type LockResult =
  | { ok: true; op: 'openSession'; id: string; timeoutMs: number; deadline: number }
  | { ok: true; op: 'heartbeat'; id: string; deadline: number }
  | { ok: true; op: 'closeSession'; id: string; released: string[] }
  | { ok: true; op: 'expire'; expired: string[] }
  | { ok: true; op: 'extendAll'; sessions: number }
  | { ok: true; op: 'acquire'; granted: true; token: number }
  | { ok: true; op: 'acquire'; granted: false; position: number | null }
  | { ok: true; op: 'release'; released: boolean; dequeued: boolean; next: string | null }
  | { ok: true; op: 'batch'; results: LockResult[] }
  | { ok: false; error: LockError; token?: number };

export interface LockState {
  name: string;
  holder: string | null;
  /** The token of the current (or last) grant; 0 before the first grant. */
  token: number;
  queue: string[];
  /** Log index of the lock's last change. */
  revision: number;
}

export interface SessionState {
  id: string;
  deadline: number;
  timeoutMs: number;
  /** Hash of the bearer token that opened the session: only that token may use it. */
  owner: string;
  owned: string[];
  waiting: string[];
}

/** A change to one lock, told to in-memory watchers as it is applied. A hint, never state. */
export interface LockChange {
  lock: LockState;
  /** Session newly granted by this change, if any. */
  granted: string | null;
  /** Session that lost the lock through this change (release or expiry), if any. */
  lost: string | null;
}

interface Lock {
  holder: string | null;
  token: number;
  queue: string[];
  revision: number;
}

interface Session {
  deadline: number;
  timeoutMs: number;
  owner: string;
  owned: Set<string>;
  waiting: Set<string>;
}

interface Snapshot {
  locks: Array<[string, Lock]>;
  sessions: Array<[string, number, number, string, string[], string[]]>;
}

const packr = new Packr({ useRecords: false });

/** A session's timeout may be at most a day: the API allows 300 s; more only makes a deadline that never comes. */
const MAX_SESSION_TIMEOUT_MS = 86_400_000;

/**
 * Throws CommandShapeError unless `command` is a LockCommand: checked before anything changes, so a malformed entry
 * (a bug or a forged one) is refused the same way on every member (ApplyError for its proposer) and changes nothing.
 */
function checkLockCommand(command: unknown): asserts command is LockCommand {
  const c = commandOf(command, [
    'openSession',
    'heartbeat',
    'closeSession',
    'expire',
    'extendAll',
    'acquire',
    'release',
    'batch',
  ] as const);
  switch (c.op) {
    case 'batch': {
      batchCommandsField(c, ['acquire', 'release'] as const, checkLockCommand, MAX_BATCH_COMMANDS);
      return;
    }
    case 'openSession':
    case 'heartbeat':
    case 'closeSession':
      if (c.op === 'openSession') integerField(c, 'timeoutMs', 1, MAX_SESSION_TIMEOUT_MS);
      stringField(c, 'id', 256);
      stringField(c, 'owner', 1024);
      return;
    case 'expire':
      stringArrayField(c, 'ids', 100_000, 256);
      return;
    case 'extendAll':
      return;
    case 'acquire':
    case 'release':
      stringField(c, 'name', 1024);
      stringField(c, 'session', 256);
      stringField(c, 'owner', 1024);
      if (c.op === 'acquire') booleanField(c, 'wait');
      else nullableIntegerField(c, 'token', 1);
      return;
  }
}

export class LockMachine implements StateMachine<LockCommand, LockResult> {
  private locks = new Map<string, Lock>();
  private sessions = new Map<string, Session>();
  /** Watch notifications (in-memory hints on this member). */
  onChange: ((change: LockChange) => void) | null = null;
  /**
   * Whether `onChange` wants changes of a name (null: every name). Each acquire and release changes a lock on
   * every member; without a watcher on it, building the change (a copy of the lock and its queue) is waste.
   */
  watched: ((name: string) => boolean) | null = null;

  apply(command: LockCommand, ctx: ApplyContext): LockResult {
    checkLockCommand(command);
    switch (command.op) {
      case 'openSession': {
        const deadline = ctx.time + command.timeoutMs;
        if (!this.sessions.has(command.id)) {
          this.sessions.set(command.id, {
            deadline,
            timeoutMs: command.timeoutMs,
            owner: command.owner,
            owned: new Set(),
            waiting: new Set(),
          });
        }
        return {
          ok: true,
          op: 'openSession',
          id: command.id,
          timeoutMs: command.timeoutMs,
          deadline: this.sessions.get(command.id)!.deadline,
        };
      }
      case 'heartbeat': {
        const s = this.session(command.id, command.owner);
        if ('error' in s) return s;
        s.session.deadline = Math.max(s.session.deadline, ctx.time + s.session.timeoutMs);
        return { ok: true, op: 'heartbeat', id: command.id, deadline: s.session.deadline };
      }
      case 'closeSession': {
        const s = this.session(command.id, command.owner);
        if ('error' in s) return s;
        const released = [...s.session.owned];
        this.endSession(command.id, ctx);
        return { ok: true, op: 'closeSession', id: command.id, released };
      }
      case 'expire': {
        const expired: string[] = [];
        for (const id of command.ids) {
          const session = this.sessions.get(id);
          // The leader's clock proposed it; the entry's time decides, identically on every member.
          if (session !== undefined && session.deadline <= ctx.time) {
            this.endSession(id, ctx);
            expired.push(id);
          }
        }
        return { ok: true, op: 'expire', expired };
      }
      case 'extendAll': {
        for (const session of this.sessions.values())
          session.deadline = Math.max(session.deadline, ctx.time + session.timeoutMs);
        return { ok: true, op: 'extendAll', sessions: this.sessions.size };
      }
      case 'acquire':
        return this.acquire(command, ctx);
      case 'release':
        return this.release(command, ctx);
      case 'batch':
        return {
          ok: true,
          op: 'batch',
          results: command.commands.map((c) => (c.op === 'acquire' ? this.acquire(c, ctx) : this.release(c, ctx))),
        };
    }
  }

  private acquire(command: Extract<LockCommand, { op: 'acquire' }>, ctx: ApplyContext): LockResult {
    const s = this.session(command.session, command.owner);
    if ('error' in s) return s;
    const lock = this.lock(command.name);
    if (lock.holder === null) {
      this.grant(command.name, lock, command.session, null, ctx);
      return { ok: true, op: 'acquire', granted: true, token: lock.token };
    }
    // Acquiring a lock one already holds returns the current grant: a retried acquire must not fail.
    if (lock.holder === command.session) return { ok: true, op: 'acquire', granted: true, token: lock.token };
    if (!command.wait) return { ok: true, op: 'acquire', granted: false, position: null };
    let position = lock.queue.indexOf(command.session);
    if (position < 0) {
      lock.queue.push(command.session);
      s.session.waiting.add(command.name);
      position = lock.queue.length - 1;
      lock.revision = ctx.index;
      this.notify(command.name, lock, null, null);
    }
    return { ok: true, op: 'acquire', granted: false, position: position + 1 };
  }

  private release(command: Extract<LockCommand, { op: 'release' }>, ctx: ApplyContext): LockResult {
    const s = this.session(command.session, command.owner);
    if ('error' in s) return s;
    const lock = this.locks.get(command.name);
    if (command.token === null) {
      const at = lock?.queue.indexOf(command.session) ?? -1;
      if (lock === undefined || at < 0) return { ok: false, error: 'not_holder' };
      lock.queue.splice(at, 1);
      s.session.waiting.delete(command.name);
      lock.revision = ctx.index;
      this.notify(command.name, lock, null, null);
      return { ok: true, op: 'release', released: false, dequeued: true, next: lock.holder };
    }
    if (lock === undefined || lock.holder !== command.session) {
      // A token from an earlier grant of this lock is stale; any other is not this session's to release.
      return lock !== undefined && command.token < lock.token
        ? { ok: false, error: 'stale_token', token: lock.token }
        : { ok: false, error: 'not_holder' };
    }
    if (command.token !== lock.token) return { ok: false, error: 'stale_token', token: lock.token };
    const next = this.handOver(command.name, lock, ctx);
    return { ok: true, op: 'release', released: true, dequeued: false, next };
  }

  /** The holder lets go: the head of the queue (if any) is granted, with the next token. */
  private handOver(name: string, lock: Lock, ctx: ApplyContext): string | null {
    const previous = lock.holder;
    if (previous !== null) this.sessions.get(previous)?.owned.delete(name);
    lock.holder = null;
    const head = lock.queue.shift() ?? null;
    if (head !== null) {
      this.sessions.get(head)?.waiting.delete(name);
      this.grant(name, lock, head, previous, ctx);
    } else {
      lock.revision = ctx.index;
      this.notify(name, lock, null, previous);
    }
    return head;
  }

  private grant(name: string, lock: Lock, session: string, lost: string | null, ctx: ApplyContext): void {
    lock.holder = session;
    lock.token += 1;
    lock.revision = ctx.index;
    this.sessions.get(session)!.owned.add(name);
    this.notify(name, lock, session, lost);
  }

  private endSession(id: string, ctx: ApplyContext): void {
    const session = this.sessions.get(id)!;
    for (const name of session.waiting) {
      const lock = this.locks.get(name)!;
      lock.queue = lock.queue.filter((q) => q !== id);
      lock.revision = ctx.index;
      this.notify(name, lock, null, null);
    }
    // Delete first, so a released lock is never handed back to the session that is ending.
    this.sessions.delete(id);
    for (const name of session.owned) this.handOver(name, this.locks.get(name)!, ctx);
  }

  private session(id: string, owner: string): { session: Session } | { ok: false; error: LockError } {
    const session = this.sessions.get(id);
    if (session === undefined) return { ok: false, error: 'unknown_session' };
    if (session.owner !== owner) return { ok: false, error: 'session_forbidden' };
    return { session };
  }

  private lock(name: string): Lock {
    let lock = this.locks.get(name);
    if (lock === undefined) {
      lock = { holder: null, token: 0, queue: [], revision: 0 };
      this.locks.set(name, lock);
    }
    return lock;
  }

  private notify(name: string, lock: Lock, granted: string | null, lost: string | null): void {
    if (this.onChange === null || (this.watched !== null && !this.watched(name))) return;
    this.onChange({ lock: this.view(name, lock), granted, lost });
  }

  private view(name: string, lock: Lock): LockState {
    return { name, holder: lock.holder, token: lock.token, queue: [...lock.queue], revision: lock.revision };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Queries (local state; the API runs them after a read barrier when linearizability is asked for)

  getLock(name: string): LockState {
    const lock = this.locks.get(name);
    return lock === undefined ? { name, holder: null, token: 0, queue: [], revision: 0 } : this.view(name, lock);
  }

  getSession(id: string): SessionState | null {
    const s = this.sessions.get(id);
    if (s === undefined) return null;
    return {
      id,
      deadline: s.deadline,
      timeoutMs: s.timeoutMs,
      owner: s.owner,
      owned: [...s.owned],
      waiting: [...s.waiting],
    };
  }

  /** Sessions whose deadline is at or before `now` (the leader proposes their expiry). */
  overdue(now: number, max = 1000): string[] {
    const out: string[] = [];
    for (const [id, s] of this.sessions) {
      if (s.deadline <= now) out.push(id);
      if (out.length >= max) break;
    }
    return out;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  snapshot(): Uint8Array {
    const snap: Snapshot = {
      locks: [...this.locks],
      sessions: [...this.sessions].map(([id, s]) => [
        id,
        s.deadline,
        s.timeoutMs,
        s.owner,
        [...s.owned],
        [...s.waiting],
      ]),
    };
    return packr.pack(snap);
  }

  restore(data: Uint8Array): void {
    const snap = packr.unpack(data) as Snapshot;
    this.locks = new Map(snap.locks);
    this.sessions = new Map(
      snap.sessions.map(([id, deadline, timeoutMs, owner, owned, waiting]) => [
        id,
        { deadline, timeoutMs, owner, owned: new Set(owned), waiting: new Set(waiting) },
      ]),
    );
  }
}
