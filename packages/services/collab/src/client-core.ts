/**
 * The client of the editor, without node-only imports, so the editor page bundles the same code programs run. The
 * WebSocket is injected (`socket`: the browser's `WebSocket`, or `ws` in Node: see src/client.ts).
 *
 * Local edits apply at once to the local replica and queue as pending changes, sent in order; a change leaves the
 * queue when the owner acknowledges it (committed in the Raft log). On any disconnect the client reconnects (to
 * the next worker of GET /api/collab/workers), joins with since_revision, merges the snapshot, and sends every
 * pending change again: the log recognises those already committed by op_id and acknowledges them at their
 * original revision, so nothing is lost and nothing applies twice. offline() stops the socket and keeps editing
 * locally; online() reconnects and flushes.
 */
import { Doc, InvalidOpError, UndoManager, type Attrs, type Id, type Op, type Span } from '@raftkit/crdt';
import { applyWithEdits, type Edit } from './edits.js';
export { applyWithEdits, type Edit } from './edits.js';
import { ACK_TIMEOUT_MS, STALE_MS, type Selection, type ServerMessage } from './protocol.js';

/** The part of a WebSocket the client uses (the browser's and `ws`'s both have it). */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type SocketFactory = (url: string) => SocketLike;

export interface CollabClientOptions {
  /** Base URL of any worker, e.g. http://127.0.0.1:8041 */
  url: string;
  docId: string;
  userId: string;
  token: string;
  socket: SocketFactory;
  /** This session's client id (`${userId}~<random>` by default): the ids of its characters. */
  clientId?: string;
  /** Other workers to fail over to; by default read from GET /api/collab/workers. */
  workers?: string[];
  /** Give up connecting (connect() rejects) after this long. Default 30 s. */
  connectTimeoutMs?: number;
}

export type ClientStatus = 'connecting' | 'syncing' | 'live' | 'offline' | 'closed';

export interface PresenceEvent {
  user_id: string;
  cursor: number | null;
  selection?: Selection | null;
  color: string;
}

export interface CollabEvents {
  /** The text changed: `remote` true for others' changes (and snapshots), false for local edits. */
  /** `edits`: a remote change as the visible edits it made, when it is a plain one (src/edits.ts); else a diff is needed. */
  change: { remote: boolean; edits?: Edit[] };
  presence: PresenceEvent;
  status: ClientStatus;
  /** An error message from the server (a rejected change, a read-only edit...). */
  error: { code: string; message: string; op_id?: string };
  /** The server closed for good (4001 unauthorised, 4003 revoked, 4404 no such document). */
  closed: { code: number; reason: string };
}

interface Pending {
  op_id: string;
  ops: Op[];
  parent_revision: number;
  /** When it was last sent (0: not sent on this connection). */
  sentAt: number;
}

const FINAL_CODES = new Set([4001, 4003, 4404]);
/** Error codes that mean the log will never take the change. */
const REFUSALS = new Set(['invalid_op', 'too_large', 'forbidden', 'read_only']);

export class CollabError extends Error {
  override name = 'CollabError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function randomId(): string {
  let s = '';
  for (let i = 0; i < 10; i++) s += 'abcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(Math.random() * 36)];
  return s;
}

function browserSocket(): SocketFactory {
  const ctor = (globalThis as { WebSocket?: new (url: string) => SocketLike }).WebSocket;
  if (ctor === undefined) throw new TypeError('no global WebSocket here: pass options.socket');
  return (url) => new ctor(url);
}

function fromBase64(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export class CollabClient {
  readonly docId: string;
  readonly userId: string;
  private clientId: string;
  private doc: Doc | null = null;
  private undoer: UndoManager | null = null;
  private pending: Pending[] = [];
  /** Every revision up to this one has been received (snapshot, ops, acks arrive in revision order). */
  private rev = 0;
  private ws: SocketLike | null = null;
  private joined = false;
  private state: ClientStatus = 'connecting';
  private wantOnline = true;
  private workers: string[];
  private workerIndex = 0;
  private attempts = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private readonlyFlag = false;
  private roleName: string | null = null;
  private listeners = new Map<keyof CollabEvents, Set<(value: never) => void>>();
  private syncWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private firstSnapshot: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private presenceTimer: ReturnType<typeof setTimeout> | null = null;
  private presenceNext: { cursor_pos: number | null; selection?: Selection } | null = null;
  private presenceAt = 0;
  private closeInfo: { code: number; reason: string } | null = null;
  private lastFrameAt = 0;
  private watchdog: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly options: CollabClientOptions) {
    this.docId = options.docId;
    this.userId = options.userId;
    this.clientId = options.clientId ?? `${options.userId}~${randomId()}`;
    this.workers = options.workers ?? [options.url];
  }

  /**
   * Connects and resolves once the document's snapshot arrived (the client is then usable). Without `socket`, the
   * global WebSocket (browsers) is used; in Node, import CollabClient from '@raftkit/collab' (it injects `ws`).
   */
  static async connect(
    options: Omit<CollabClientOptions, 'socket'> & { socket?: SocketFactory },
  ): Promise<CollabClient> {
    const client = new CollabClient({ ...options, socket: options.socket ?? browserSocket() });
    await client.start();
    return client;
  }

  // ------------------------------------------------------------------ reading

  text(): string {
    return this.requireDoc().text();
  }

  spans(): Span[] {
    return this.requireDoc().spans();
  }

  get length(): number {
    return this.requireDoc().length;
  }

  /** The last revision received (every one before it too). */
  get revision(): number {
    return this.rev;
  }

  get status(): ClientStatus {
    return this.state;
  }

  get readOnly(): boolean {
    return this.readonlyFlag;
  }

  get role(): string | null {
    return this.roleName;
  }

  /** Changes not acknowledged yet. */
  get pendingCount(): number {
    return this.pending.length;
  }

  /** Character ids of a range, for comments ({start, end} of POST /api/docs/{id}/comments). */
  anchor(index: number, length: number): { start: Id; end: Id } {
    const doc = this.requireDoc();
    return { start: doc.charId(index), end: doc.charId(index + Math.max(1, length) - 1) };
  }

  /** The visible index of a character id (for comments' anchors), or null. */
  indexOf(id: Id): number | null {
    return this.requireDoc().indexOf(id)?.index ?? null;
  }

  // ------------------------------------------------------------------ editing

  insert(index: number, text: string, attrs?: Attrs): void {
    const doc = this.editable();
    const ops = doc.localInsert(index, text, attrs);
    this.undoer!.recordInsert(ops);
    this.submit(ops);
  }

  delete(index: number, length: number): void {
    const doc = this.editable();
    const change = this.undoer!.beforeDelete(index, length);
    const ops = doc.localDelete(index, length);
    this.undoer!.record(change);
    this.submit(ops);
  }

  format(index: number, length: number, attrs: Attrs): void {
    const doc = this.editable();
    const change = this.undoer!.beforeFormat(index, length, attrs);
    const ops = doc.localFormat(index, length, attrs);
    this.undoer!.record(change);
    this.submit(ops);
  }

  /** Undoes this user's own last change (never anyone else's); false when there was nothing to undo. */
  undo(): boolean {
    this.editable();
    const ops = this.undoer!.undo();
    this.submit(ops);
    return ops.length > 0;
  }

  redo(): boolean {
    this.editable();
    const ops = this.undoer!.redo();
    this.submit(ops);
    return ops.length > 0;
  }

  get canUndo(): boolean {
    return this.undoer?.canUndo ?? false;
  }

  get canRedo(): boolean {
    return this.undoer?.canRedo ?? false;
  }

  /** Cursor and selection (lossy, throttled to one message per 100 ms; the latest wins). */
  presence(cursor: number | null, selection?: Selection): void {
    this.presenceNext = { cursor_pos: cursor, ...(selection !== undefined ? { selection } : {}) };
    const wait = this.presenceAt + 100 - Date.now();
    if (wait > 0) {
      this.presenceTimer ??= setTimeout(() => {
        this.presenceTimer = null;
        this.flushPresence();
      }, wait);
      return;
    }
    this.flushPresence();
  }

  // ------------------------------------------------------------------ connection

  /** Stops talking to the server; edits keep applying locally and are sent on online(). */
  offline(): void {
    this.wantOnline = false;
    this.dropSocket();
    this.setStatus('offline');
  }

  online(): void {
    if (this.state === 'closed' || this.wantOnline) return;
    this.wantOnline = true;
    this.attempts = 0;
    this.connect();
  }

  /** Resolves when every local change is acknowledged and the client is live (caught up with the owner). */
  synced(timeoutMs = 60_000): Promise<void> {
    if (this.isSynced()) return Promise.resolve();
    if (this.state === 'closed')
      return Promise.reject(new CollabError('closed', `the connection closed (${this.closeInfo?.code})`));
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
        reject(
          new CollabError(
            'timeout',
            `not synced after ${timeoutMs} ms (${this.pending.length} pending, ${this.state})`,
          ),
        );
      }, timeoutMs);
      this.syncWaiters.push(waiter);
    });
  }

  close(): void {
    this.wantOnline = false;
    this.dropSocket();
    this.finish({ code: 1000, reason: 'closed by the client' });
  }

  on<K extends keyof CollabEvents>(event: K, listener: (value: CollabEvents[K]) => void): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(listener as (value: never) => void);
    return () => set.delete(listener as (value: never) => void);
  }

  // ------------------------------------------------------------------ internals

  /** Opens the first connection; resolves at the first snapshot (connect() calls it). */
  async start(): Promise<void> {
    if (this.options.workers === undefined) {
      try {
        const res = await fetch(`${this.options.url}/api/collab/workers`, {
          headers: { authorization: `Bearer ${this.options.token}` },
        });
        if (res.ok) {
          const body = (await res.json()) as { workers?: Array<{ url: string }> };
          const urls = (body.workers ?? []).map((w) => w.url);
          // The worker we were given first, then the others in their order.
          this.workers = [this.options.url, ...urls.filter((u) => u !== this.options.url)];
        }
      } catch {
        // Only the given worker, then.
      }
    }
    const ready = new Promise<void>((resolve, reject) => {
      this.firstSnapshot = { resolve, reject };
    });
    // A socket can stay open to a dead or paused worker: no frame for STALE_MS (the owner sends one every 5 s), or
    // a change unacknowledged for ACK_TIMEOUT_MS, and the client reconnects elsewhere.
    this.watchdog = setInterval(() => {
      if (this.ws === null || !this.joined) return;
      const now = Date.now();
      const oldest = this.pending.find((p) => p.sentAt > 0);
      if (now - this.lastFrameAt > STALE_MS || (oldest !== undefined && now - oldest.sentAt > ACK_TIMEOUT_MS)) {
        this.dropSocket();
        this.setStatus('syncing');
        this.scheduleReconnect();
      }
    }, 1_000);
    const timeout = this.options.connectTimeoutMs ?? 30_000;
    const timer = setTimeout(
      () => this.firstSnapshot?.reject(new CollabError('timeout', `no snapshot within ${timeout} ms`)),
      timeout,
    );
    this.connect();
    try {
      await ready;
    } catch (error) {
      this.close();
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private connect(): void {
    if (!this.wantOnline || this.state === 'closed') return;
    this.setStatus(this.doc === null ? 'connecting' : 'syncing');
    const base = this.workers[this.workerIndex % this.workers.length]!;
    const url = `${base.replace(/^http/, 'ws')}/ws/docs/${encodeURIComponent(this.docId)}?token=${encodeURIComponent(this.options.token)}`;
    let ws: SocketLike;
    try {
      ws = this.options.socket(url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.joined = false;
    ws.onopen = () => {
      const join =
        this.doc === null
          ? { type: 'join', user_id: this.userId }
          : { type: 'join', user_id: this.userId, since_revision: this.rev };
      ws.send(JSON.stringify(join));
    };
    ws.onmessage = (event) => {
      if (this.ws !== ws) return;
      this.lastFrameAt = Date.now();
      let message: ServerMessage;
      try {
        message = JSON.parse(String(event.data)) as ServerMessage;
      } catch {
        return;
      }
      this.receive(message);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.joined = false;
      if (FINAL_CODES.has(event.code)) {
        this.finish({ code: event.code, reason: event.reason });
        return;
      }
      if (!this.wantOnline) return;
      this.setStatus('syncing');
      this.scheduleReconnect();
    };
    ws.onerror = () => undefined;
  }

  private scheduleReconnect(): void {
    if (this.reconnectTimer !== null || !this.wantOnline) return;
    this.attempts++;
    // The next worker each time (the one we used may be dead); a short backoff, growing to 1 s.
    this.workerIndex++;
    const delay = Math.min(1000, 50 * 2 ** Math.min(this.attempts, 5));
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect();
    }, delay);
  }

  private receive(m: ServerMessage): void {
    switch (m.type) {
      case 'snapshot': {
        const bytes = fromBase64(m.content);
        if (this.doc === null) {
          this.doc = Doc.decode(bytes, this.clientId);
          this.undoer = new UndoManager(this.doc);
          // Rebuilt after a refusal: the changes still pending (made under the old client id, before the refused
          // one) belong in the new replica too; the CRDT ignores those the snapshot already holds.
          for (const p of this.pending) this.applyRemote(p.ops);
        } else {
          const remote = Doc.decode(bytes, '~snapshot');
          this.applyRemote(remote.opsSince(this.doc.stateVector()));
        }
        this.rev = Math.max(this.rev, m.revision);
        this.readonlyFlag = m.read_only === true;
        this.roleName = m.role ?? null;
        this.joined = true;
        this.attempts = 0;
        // Everything not acknowledged goes again, in order (the log answers duplicates with their first revision).
        for (const p of this.pending) this.sendChange(p);
        this.emit('change', { remote: true });
        const first = this.firstSnapshot;
        this.firstSnapshot = null;
        first?.resolve();
        if (this.presenceNext !== null) this.flushPresence();
        return;
      }
      case 'op': {
        const own = this.pending.findIndex((p) => p.op_id === m.op_id);
        if (own >= 0) this.pending.splice(own, 1);
        const edits = own >= 0 ? null : applyWithEdits(this.doc!, m.op);
        this.rev = Math.max(this.rev, m.revision);
        this.send({ type: 'ack', ack_revision: this.rev });
        if (own < 0) this.emit('change', edits === null ? { remote: true } : { remote: true, edits });
        this.checkSynced();
        return;
      }
      case 'ack': {
        const i = this.pending.findIndex((p) => p.op_id === m.op_id);
        if (i >= 0) this.pending.splice(i, 1);
        this.rev = Math.max(this.rev, m.revision);
        this.checkSynced();
        return;
      }
      case 'presence':
        this.emit('presence', {
          user_id: m.user_id,
          cursor: m.cursor,
          ...(m.selection !== undefined ? { selection: m.selection } : {}),
          color: m.color,
        });
        return;
      case 'status':
        this.setStatus(m.state === 'live' && this.joined ? 'live' : 'syncing');
        return;
      case 'error':
        this.emit('error', { code: m.code, message: m.message, ...(m.op_id !== undefined ? { op_id: m.op_id } : {}) });
        // A refusal drops the change; `busy` (and anything else) leaves it pending: it goes again on reconnect.
        if (m.op_id !== undefined && REFUSALS.has(m.code)) this.rejected(m.op_id, m.code);
        return;
    }
  }

  /**
   * The log refused a change (too large, invalid, read-only): it and every later pending change (which may build on
   * it) are dropped, and the replica is rebuilt from the server's snapshot under a fresh client id, so this client
   * shows what everyone else sees.
   */
  private rejected(opId: string, code: string): void {
    const i = this.pending.findIndex((p) => p.op_id === opId);
    if (i < 0) return;
    if (code === 'read_only') this.readonlyFlag = true;
    this.pending.splice(i);
    this.doc = null;
    this.undoer = null;
    this.clientId = `${this.userId}~${randomId()}`;
    this.dropSocket();
    this.rev = 0;
    if (this.wantOnline) this.connect();
    this.checkSynced();
  }

  private applyRemote(ops: readonly Op[]): void {
    try {
      this.doc!.apply(ops);
    } catch (error) {
      if (!(error instanceof InvalidOpError)) throw error;
    }
  }

  private submit(ops: Op[]): void {
    if (ops.length === 0) return;
    const first = ops[0]!;
    const change: Pending = { op_id: `${first.id[0]}:${first.id[1]}`, ops, parent_revision: this.rev, sentAt: 0 };
    this.pending.push(change);
    this.emit('change', { remote: false });
    if (this.joined) this.sendChange(change);
  }

  private sendChange(p: Pending): void {
    if (this.ws !== null && this.joined) p.sentAt = Date.now();
    this.send({ type: 'op', op_id: p.op_id, op: p.ops, parent_revision: p.parent_revision });
  }

  private send(message: object): void {
    if (this.ws !== null && this.ws.readyState === 1 && this.joined) this.ws.send(JSON.stringify(message));
  }

  private flushPresence(): void {
    if (this.presenceNext === null || !this.joined) return;
    this.presenceAt = Date.now();
    this.send({ type: 'presence', ...this.presenceNext });
    this.presenceNext = null;
  }

  private editable(): Doc {
    const doc = this.requireDoc();
    if (this.readonlyFlag)
      throw new CollabError('read_only', `this client joined read-only (role ${this.roleName ?? 'unknown'})`);
    return doc;
  }

  private requireDoc(): Doc {
    if (this.doc === null)
      throw new CollabError('not_ready', 'the document has not arrived yet (rebuilding after a rejected change?)');
    return this.doc;
  }

  private dropSocket(): void {
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    const ws = this.ws;
    this.ws = null;
    this.joined = false;
    if (ws !== null) {
      try {
        ws.close(1000, 'client');
      } catch {
        // Already closing.
      }
    }
  }

  private finish(info: { code: number; reason: string }): void {
    if (this.state === 'closed') return;
    this.closeInfo = info;
    if (this.presenceTimer !== null) clearTimeout(this.presenceTimer);
    if (this.watchdog !== null) clearInterval(this.watchdog);
    this.setStatus('closed');
    this.emit('closed', info);
    const error = new CollabError('closed', `the connection closed (${info.code} ${info.reason})`);
    this.firstSnapshot?.reject(error);
    this.firstSnapshot = null;
    for (const w of this.syncWaiters.splice(0)) w.reject(error);
  }

  private setStatus(state: ClientStatus): void {
    if (this.state === state || this.state === 'closed') return;
    this.state = state;
    this.emit('status', state);
    this.checkSynced();
  }

  private isSynced(): boolean {
    return this.pending.length === 0 && this.state === 'live' && this.joined;
  }

  private checkSynced(): void {
    if (!this.isSynced()) return;
    for (const w of this.syncWaiters.splice(0)) w.resolve();
  }

  private emit<K extends keyof CollabEvents>(event: K, value: CollabEvents[K]): void {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        (listener as (v: CollabEvents[K]) => void)(value);
      } catch {
        // A listener's failure is its own.
      }
    }
  }
}
