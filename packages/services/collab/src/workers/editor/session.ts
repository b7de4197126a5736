/**
 * One document owned by this worker: the CRDT replica rebuilt from the op log, the clients connected to it (directly
 * or through another worker's proxy), the queue of their changes, presence, and the permission re-check.
 *
 * Changes are committed in order, in batches, pipelined: up to MAX_INFLIGHT append entries are in flight at once
 * (a keystroke no longer waits for the previous entry's commit before its own starts); the changes read in one turn
 * of the event loop go in one entry, and while the window is full the changes that arrive queue and go together in
 * the next entry. A committed entry's changes are broadcast in one turn, so each client's frames for it leave in one
 * write (frames.ts). Entries carry this session's id and a
 * sequence number; the log applies entry k only right after entry k-1 (else `out_of_order`), so the log's order is
 * the owner's order whatever order the requests reach the leader in. Results are handled in sequence order: an
 * entry whose request failed (or was refused out of order) is sent again when it is the oldest one outstanding, and
 * an entry sent again after it was applied changes nothing (the log answers its changes' first outcome).
 * A change is acknowledged to its author only when its entry is committed, and broadcast to the others then. If
 * the log cannot be reached, the entry is retried as is and clients are told `syncing`; if the log says the
 * generation is stale, the document was given to another worker: every client is closed with 1012 and reconnects
 * to the new owner.
 */
import { randomUUID } from 'node:crypto';
import { checkOp, Doc, InvalidOpError, type Op } from '@raftkit/crdt';
import type { WebSocket } from 'ws';
import { DEFAULT_MAX_BODY_BYTES, ServiceError } from '@raftkit/http';
import {
  atLeast,
  MAX_OPS_PER_CHANGE,
  type ChangeEntry,
  type ChangeInput,
  type CollabCommand,
  type CollabResult,
  type Role,
} from '../../machine.js';
import { encode, pushText } from './frames.js';
import type { LogAccess, StateView } from './log-access.js';
import {
  CLOSE_MOVING,
  CLOSE_NO_DOC,
  CLOSE_REVOKED,
  colorOf,
  KEEPALIVE_MS,
  MAX_FRAME_BYTES,
  PRESENCE_EXPIRY_MS,
  PRESENCE_THROTTLE_MS,
  type Selection,
  type ServerMessage,
} from '../../protocol.js';

/** Committed changes kept in memory for reconnects (older ones are read from the log). */
const RECENT = 5_000;
const MAX_BATCH = 200;
/** The append limit: the largest append request a member takes (its HTTP body limit, 413 beyond). */
const APPEND_LIMIT_BYTES = DEFAULT_MAX_BODY_BYTES;
/** Room in an append request for all but its changes (doc_id, generation, session, seq, the JSON around them). */
const APPEND_ENVELOPE_BYTES = 1024;
/**
 * The op size limit: a change (its JSON as it goes into an append) larger than this could never be appended, so it
 * is refused at once with `too_large`, to its author only. 1,047,552 bytes.
 */
const MAX_CHANGE_BYTES = APPEND_LIMIT_BYTES - APPEND_ENVELOPE_BYTES;
/** Bytes of changes one append entry carries (at least one change). */
const MAX_BATCH_BYTES = MAX_CHANGE_BYTES;
/** Bytes of changes queued per document (waiting for room in the window of entries in flight) before `busy`. */
const MAX_QUEUE_BYTES = 4 * MAX_FRAME_BYTES;
/** Bytes of one client's changes queued or in flight before `busy` (the per-session bound): two frames. */
const MAX_CLIENT_PENDING_BYTES = 2 * MAX_FRAME_BYTES;
/**
 * Append entries in flight per document (each one Raft entry; the leader batches them into its appends). Fewer
 * entries carry more changes each: every entry costs an HTTP request, a Raft entry on three members and a frame to
 * every client, so a wide window spent the CPU the commit path needs when the machine is busy (bench/RESULTS.md).
 */
const MAX_INFLIGHT = 4;
/** Bytes a client may leave unread before it is dropped: a welcome and a few full-size changes (frames: 4 MiB). */
export const MAX_UNSENT_BYTES = 16 * 1024 * 1024;

export interface Conn {
  ws: WebSocket;
  user: string;
  role: Role;
  readOnly: boolean;
  /** Presence: last sent, the latest waiting for the throttle, when last heard. */
  presenceSentAt: number;
  presenceTimer: NodeJS.Timeout | null;
  presence: { cursor: number | null; selection: Selection | null } | null;
  lastSeen: number;
  /** Bytes of this client's changes queued or in flight (bounded by MAX_CLIENT_PENDING_BYTES). */
  pending: number;
}

interface Queued {
  conn: Conn;
  change: ChangeInput;
  bytes: number;
}

/** This process's pipeline figures (worker metrics): the most entries in flight at once, entries sent again. */
export const appendStats = { maxInFlight: 0, resentFailed: 0, resentOutOfOrder: 0, refused: 0 };

type Outcome = { ok: true; result: CollabResult } | { ok: false; error: Error };

/** One append entry of this session: its number, its changes, and the answer to its latest request. */
interface Entry {
  seq: number;
  items: Queued[];
  outcome: Promise<Outcome>;
}

interface SessionHooks {
  /** The session is over (lost, released or failed): forget it. */
  ended(session: DocSession): void;
  log(level: 'info' | 'warn', message: string, fields?: Record<string, unknown>): void;
}

export class DocSession {
  readonly conns = new Set<Conn>();
  revision: number;
  private readonly doc: Doc;
  private recent: ChangeEntry[] = [];
  private queue: Queued[] = [];
  private queueBytes = 0;
  /** Sent entries not handled yet, oldest first. */
  private window: Entry[] = [];
  private draining = false;
  private pumpScheduled = false;
  /**
   * Names this session's append entries (the owner may open a document again with the same generation). A new one
   * is drawn when the log refuses an entry outright (a 4xx): the entries after it are numbered again from 1.
   */
  private appendSession = randomUUID();
  private nextSeq = 1;
  private ended = false;
  private syncing = false;
  /** When the last client left (for idle release), or null while clients are connected. */
  idleSince: number | null = Date.now();

  private constructor(
    readonly docId: string,
    readonly generation: number,
    private readonly log: LogAccess,
    private readonly maxEditors: number,
    private readonly hooks: SessionHooks,
    state: StateView,
    private readonly maxChangeBytes: number,
  ) {
    this.doc = Doc.decode(Buffer.from(state.content, 'base64'), `~worker`);
    this.revision = state.meta.revision;
    if (state.changes !== null) this.recent = state.changes.slice(-RECENT);
  }

  /**
   * Loads the document from the log (a linearizable read: every committed change is in it). `maxChangeBytes`: the
   * op size limit (a test raises it past the append limit to make the log itself refuse an append).
   */
  static async open(
    docId: string,
    generation: number,
    log: LogAccess,
    maxEditors: number,
    hooks: SessionHooks,
    maxChangeBytes = MAX_CHANGE_BYTES,
  ): Promise<DocSession | null> {
    const state = await log.state(docId, 0, RECENT);
    if (state === null) return null;
    return new DocSession(docId, generation, log, maxEditors, hooks, state, maxChangeBytes);
  }

  get isEnded(): boolean {
    return this.ended;
  }

  get editors(): number {
    let n = 0;
    for (const c of this.conns) if (!c.readOnly && c.role === 'editor') n++;
    return n;
  }

  text(): string {
    return this.doc.text();
  }

  /** Serves a joining client: snapshot, the changes after `since` it may lack, then live. */
  join(conn: Conn, since: number | undefined): void {
    conn.readOnly = !atLeast(conn.role, 'editor') || this.editors >= this.maxEditors;
    this.conns.add(conn);
    this.idleSince = null;
    send(conn, {
      type: 'snapshot',
      revision: this.revision,
      content: Buffer.from(this.doc.encode()).toString('base64'),
      read_only: conn.readOnly,
      role: conn.role,
    });
    if (
      since !== undefined &&
      since < this.revision &&
      this.recent.length > 0 &&
      this.recent[0]!.revision <= since + 1
    ) {
      // The changes since: a CRDT ignores what the snapshot already holds, and the client learns their op_ids
      // (its own among them are acknowledged that way).
      for (const e of this.recent)
        if (e.revision > since)
          send(conn, { type: 'op', op_id: e.op_id, op: e.ops, revision: e.revision, author: e.author });
    }
    send(conn, { type: 'status', state: this.syncing ? 'syncing' : 'live' });
    // Everyone already here is shown to the newcomer.
    for (const other of this.conns) {
      if (other !== conn && other.presence !== null) send(conn, presenceOf(other));
    }
  }

  leave(conn: Conn): void {
    if (!this.conns.delete(conn)) return;
    if (conn.presenceTimer !== null) clearTimeout(conn.presenceTimer);
    if (![...this.conns].some((c) => c.user === conn.user))
      this.broadcast({ type: 'presence', user_id: conn.user, cursor: null, color: colorOf(conn.user) }, conn);
    if (this.conns.size === 0) this.idleSince = Date.now();
    // An editor's seat freed: the longest-waiting editor who joined read-only gets it (a fresh snapshot says so).
    if (!conn.readOnly && conn.role === 'editor') {
      for (const c of this.conns) {
        if (c.readOnly && c.role === 'editor' && this.editors < this.maxEditors) {
          c.readOnly = false;
          send(c, {
            type: 'snapshot',
            revision: this.revision,
            content: Buffer.from(this.doc.encode()).toString('base64'),
            read_only: false,
            role: c.role,
          });
          break;
        }
      }
    }
  }

  submit(conn: Conn, op_id: string, ops: Op[], parent_revision: number): void {
    if (conn.readOnly) {
      send(conn, {
        type: 'error',
        code: 'read_only',
        message: atLeast(conn.role, 'editor')
          ? `this document has ${this.maxEditors} active editors: you joined read-only`
          : `your role (${conn.role}) cannot edit`,
        op_id,
      });
      return;
    }
    // Shapes checked here too (the log checks again), so a malformed change never reaches a Raft entry.
    try {
      if (ops.length === 0 || ops.length > MAX_OPS_PER_CHANGE)
        throw new Error(`op must be a list of 1..${MAX_OPS_PER_CHANGE} ops`);
      for (const op of ops) checkOp(op);
    } catch (error) {
      send(conn, { type: 'error', code: 'invalid_op', message: (error as Error).message, op_id });
      return;
    }
    const change: ChangeInput = { op_id, author: conn.user, ops, parent_revision };
    // What the change weighs in an append request. One that cannot fit one is refused now: sent on, the member
    // would answer 413 and no later change of the document could be committed behind it.
    const bytes = Buffer.byteLength(JSON.stringify(change)) + 1;
    if (bytes > this.maxChangeBytes) {
      send(conn, {
        type: 'error',
        code: 'too_large',
        message: `this change is ${bytes} bytes; a change is at most ${this.maxChangeBytes} bytes (split a large paste)`,
        op_id,
      });
      return;
    }
    if (conn.pending + bytes > MAX_CLIENT_PENDING_BYTES || this.queueBytes + bytes > MAX_QUEUE_BYTES) {
      // Not a refusal of the change: the client keeps it pending and sends it again (it reconnects when unacked).
      const whose =
        conn.pending + bytes > MAX_CLIENT_PENDING_BYTES
          ? `your changes waiting for the log (at most ${MAX_CLIENT_PENDING_BYTES} bytes)`
          : `changes waiting for the log (at most ${MAX_QUEUE_BYTES} bytes per document)`;
      send(conn, {
        type: 'error',
        code: 'busy',
        message: `too many ${whose}; this one was not queued: send it again shortly`,
        op_id,
      });
      return;
    }
    this.queueBytes += bytes;
    conn.pending += bytes;
    this.queue.push({ conn, change, bytes });
    // The entry goes at the end of this turn, with every change read from the sockets in it (one append request
    // and one Raft entry for them all, not one each).
    if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
  }

  presence(conn: Conn, cursor: number | null, selection: Selection | null): void {
    conn.lastSeen = Date.now();
    conn.presence = { cursor, selection };
    // Throttled, lossy: at most one update per PRESENCE_THROTTLE_MS per client; the latest one wins.
    const wait = conn.presenceSentAt + PRESENCE_THROTTLE_MS - Date.now();
    if (wait > 0) {
      conn.presenceTimer ??= setTimeout(() => {
        conn.presenceTimer = null;
        this.flushPresence(conn);
      }, wait);
      return;
    }
    this.flushPresence(conn);
  }

  private flushPresence(conn: Conn): void {
    if (!this.conns.has(conn) || conn.presence === null) return;
    conn.presenceSentAt = Date.now();
    this.broadcast(presenceOf(conn), conn);
  }

  private lastKeepalive = 0;

  /**
   * A status frame every KEEPALIVE_MS even when nothing happens, so a client notices a dead or paused owner (no
   * frame for a while) and reconnects elsewhere; browsers cannot send WebSocket pings, so it is a message.
   */
  keepalive(now: number): void {
    if (now - this.lastKeepalive < KEEPALIVE_MS) return;
    this.lastKeepalive = now;
    this.broadcast({ type: 'status', state: this.syncing ? 'syncing' : 'live' }, null);
  }

  /** Users silent for PRESENCE_EXPIRY_MS are announced gone (their socket stays). */
  expirePresence(now: number): void {
    for (const c of this.conns) {
      if (c.presence !== null && c.presence.cursor !== null && now - c.lastSeen > PRESENCE_EXPIRY_MS) {
        c.presence = null;
        this.broadcast({ type: 'presence', user_id: c.user, cursor: null, color: colorOf(c.user) }, c);
      }
    }
  }

  /** Re-reads permissions: a revoked user is closed (4003); a demoted one becomes read-only. */
  async recheck(): Promise<void> {
    if (this.conns.size === 0) return;
    const view = await this.log.meta(this.docId);
    if (view === null) {
      this.end(CLOSE_NO_DOC, 'the document is gone');
      return;
    }
    const roles = new Map(view.permissions.map((p) => [p.user, p.role]));
    for (const c of [...this.conns]) {
      const role = roles.get(c.user) ?? null;
      if (role === null) {
        send(c, { type: 'error', code: 'forbidden', message: 'your access to this document was revoked' });
        this.leave(c);
        c.ws.close(CLOSE_REVOKED, 'permission revoked');
        continue;
      }
      c.role = role;
      if (!atLeast(role, 'editor')) c.readOnly = true;
    }
  }

  /** Another writer (a restore) appended: catch up and broadcast. */
  async catchUp(): Promise<void> {
    const state = await this.log.state(this.docId, this.revision);
    if (state === null) return;
    this.absorb(state.changes, state);
  }

  /** Applies committed changes this replica lacks (revisions after this.revision), broadcasting them. */
  private absorb(changes: ChangeEntry[] | null, state: StateView): void {
    if (changes === null) {
      // Older than the hot log (cannot happen while we own it): start over from the document itself.
      this.end(CLOSE_MOVING, 'resynchronising');
      return;
    }
    for (const e of changes) {
      if (e.revision <= this.revision) continue;
      this.applyCommitted(e, null);
    }
    this.revision = Math.max(this.revision, state.meta.revision);
  }

  private applyCommitted(e: ChangeEntry, author: Conn | null): void {
    try {
      this.doc.apply(e.ops);
    } catch (error) {
      if (!(error instanceof InvalidOpError)) throw error;
    }
    this.revision = e.revision;
    this.recent.push(e);
    if (this.recent.length > RECENT * 2) this.recent = this.recent.slice(-RECENT);
    this.broadcast({ type: 'op', op_id: e.op_id, op: e.ops, revision: e.revision, author: e.author }, author);
  }

  /** Sends queued changes as new entries while the window has room. */
  private pump(): void {
    while (!this.ended && this.queue.length > 0 && this.window.length < MAX_INFLIGHT) {
      let n = 0;
      let size = 0;
      // Each change's bytes include its separating comma: the entry's changes and envelope fit one append request.
      while (n < this.queue.length && n < MAX_BATCH && (n === 0 || size + this.queue[n]!.bytes <= MAX_BATCH_BYTES))
        size += this.queue[n++]!.bytes;
      const items = this.queue.splice(0, n);
      this.queueBytes -= size;
      const entry: Entry = {
        seq: this.nextSeq++,
        items,
        outcome: Promise.resolve({ ok: false, error: new Error('not sent') }),
      };
      this.dispatch(entry);
      this.window.push(entry);
      appendStats.maxInFlight = Math.max(appendStats.maxInFlight, this.window.length);
    }
    void this.drain();
  }

  private dispatch(entry: Entry): void {
    const command: CollabCommand = {
      op: 'append',
      doc_id: this.docId,
      generation: this.generation,
      changes: entry.items.map((q) => q.change),
      session: this.appendSession,
      seq: entry.seq,
    };
    entry.outcome = this.log.command(this.docId, command).then(
      (result): Outcome => ({ ok: true, result }),
      (error: unknown): Outcome => ({ ok: false, error: error instanceof Error ? error : new Error(String(error)) }),
    );
  }

  /** Handles answers in sequence order; the oldest entry is sent again until the log has it. */
  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      let attempt = 0;
      while (!this.ended && this.window.length > 0) {
        const entry = this.window[0]!;
        const outcome = await entry.outcome;
        if (this.ended) return;
        if (!outcome.ok && refusedOutright(outcome.error)) {
          // The log refused the request itself (a 4xx: too large, malformed): sent again it would be refused again,
          // and every later entry would wait behind it. Its changes are refused to their authors (they drop them
          // and rebuild), and the entries after it go again under a new session numbered from 1 (none of them can
          // have been applied: each waits for this one).
          const e = outcome.error as ServiceError;
          appendStats.refused++;
          this.hooks.log('warn', 'append refused by the log; its changes dropped', {
            doc: this.docId,
            seq: entry.seq,
            status: e.status,
            code: e.code,
            changes: entry.items.length,
          });
          for (const q of entry.items)
            send(q.conn, {
              type: 'error',
              code: e.status === 413 ? 'too_large' : 'invalid_op',
              message: `the op log refused this change (${e.status} ${e.code})`,
              op_id: q.change.op_id,
            });
          this.settle(entry);
          this.window.shift();
          this.appendSession = randomUUID();
          this.nextSeq = 1;
          for (const later of this.window) {
            later.seq = this.nextSeq++;
            this.dispatch(later);
          }
          this.pump();
          continue;
        }
        if (!outcome.ok) {
          // The log is unreachable (no quorum, no leader): clients see syncing and keep their ops; same entry again
          // (if it was applied after all, the log answers with its first outcome).
          this.setSyncing(true);
          this.hooks.log('warn', 'append failed; retrying', {
            doc: this.docId,
            seq: entry.seq,
            error: outcome.error.message,
          });
          await new Promise((r) => setTimeout(r, Math.min(2000, 200 * ++attempt)));
          if (this.ended) return;
          appendStats.resentFailed++;
          this.dispatch(entry);
          continue;
        }
        const result = outcome.result;
        if (!result.ok && result.code === 'out_of_order') {
          // It overtook an earlier entry that the log had not applied yet (now it has: that one was handled).
          appendStats.resentOutOfOrder++;
          this.dispatch(entry);
          continue;
        }
        attempt = 0;
        this.setSyncing(false);
        if (!result.ok) {
          this.end(result.code === 'no_such_doc' ? CLOSE_NO_DOC : CLOSE_MOVING, result.message);
          return;
        }
        if (result.op !== 'append') throw new Error('unexpected append result');
        // Something else was committed before this entry (a restore, a partly invalid change, or this entry had
        // been applied already and later ones with it): read it first, in order.
        try {
          if (result.base > this.revision) await this.absorbUpTo(result.base);
          for (let i = 0; i < result.results.length && !this.ended; i++) {
            const r = result.results[i]!;
            const { conn, change } = entry.items[i]!;
            if (!r.ok) {
              send(conn, { type: 'error', code: r.code, message: r.message, op_id: r.op_id });
              continue;
            }
            if (!r.duplicate && r.revision > this.revision) {
              // A gap: a partly invalid change of this entry committed its valid part under a refusal.
              if (r.revision > this.revision + 1) await this.absorbUpTo(r.revision - 1);
              this.applyCommitted(
                {
                  revision: r.revision,
                  op_id: r.op_id,
                  author: change.author,
                  ops: change.ops,
                  parent_revision: change.parent_revision,
                  time: Date.now(),
                },
                conn,
              );
            }
            send(conn, { type: 'ack', op_id: r.op_id, revision: r.revision });
          }
        } catch (error) {
          // The read of the changes before it failed: handle this answer again shortly (what was done is not
          // done twice: replica changes go by revision, and an ack repeated is ignored by the client).
          this.setSyncing(true);
          this.hooks.log('warn', 'reading the log failed; retrying', {
            doc: this.docId,
            error: String((error as Error).message ?? error),
          });
          await new Promise((r) => setTimeout(r, Math.min(2000, 200 * ++attempt)));
          continue;
        }
        this.settle(entry);
        this.window.shift();
        this.pump();
      }
    } finally {
      this.draining = false;
    }
  }

  /** The entry's changes no longer count against their clients' bound. */
  private settle(entry: Entry): void {
    for (const q of entry.items) q.conn.pending -= q.bytes;
  }

  /** Reads and applies the committed changes up to `revision` this replica lacks. */
  private async absorbUpTo(revision: number): Promise<void> {
    const state = await this.log.state(this.docId, this.revision);
    if (state === null || this.ended) return;
    const missing = (state.changes ?? []).filter((e) => e.revision <= revision);
    this.absorb(missing, { ...state, meta: { ...state.meta, revision: Math.min(revision, state.meta.revision) } });
  }

  private setSyncing(on: boolean): void {
    if (this.syncing === on) return;
    this.syncing = on;
    this.broadcast({ type: 'status', state: on ? 'syncing' : 'live' }, null);
  }

  /** Ends the session: every client is closed with `code` (1012: reconnect, the document moves). */
  end(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    for (const c of this.conns) {
      if (c.presenceTimer !== null) clearTimeout(c.presenceTimer);
      if (code === CLOSE_MOVING) send(c, { type: 'status', state: 'syncing' });
      c.ws.close(code, reason.slice(0, 120));
    }
    this.conns.clear();
    this.queue = [];
    this.window = [];
    this.hooks.ended(this);
  }

  broadcast(message: ServerMessage, except: Conn | null): void {
    const bytes = encode(message);
    for (const c of this.conns) if (c !== except) pushText(c.ws, bytes, MAX_UNSENT_BYTES);
  }
}

function presenceOf(c: Conn): ServerMessage {
  const p = c.presence!;
  return {
    type: 'presence',
    user_id: c.user,
    cursor: p.cursor,
    ...(p.selection !== null ? { selection: p.selection } : {}),
    color: colorOf(c.user),
  };
}

export function send(conn: Conn, message: ServerMessage): void {
  // A client that does not read is dropped rather than buffered for: it resyncs from the document when it rejoins.
  pushText(conn.ws, JSON.stringify(message), MAX_UNSENT_BYTES);
}

/** A 4xx answer from the op log (not a timeout or backpressure): the request itself is refused for good. */
function refusedOutright(error: Error): boolean {
  return (
    error instanceof ServiceError &&
    error.status >= 400 &&
    error.status < 500 &&
    error.status !== 408 &&
    error.status !== 429
  );
}
