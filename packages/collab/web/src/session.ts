/**
 * The page's connection to a document: the wire contract of the collab service (join, op, presence, ack; snapshot,
 * op, presence, ack, error, status) over the browser's WebSocket, with an offline queue and reconnection with
 * since_revision to another worker when one goes away. Knows nothing of the editor: it keeps the CRDT document,
 * tells the page about remote ops and state changes, and takes the ops of local changes.
 *
 * The document is merged, never replaced: a snapshot is applied as the ops this replica lacks, so edits made
 * offline (and not yet acknowledged) survive a reconnect, and the queued ops are then sent again by op_id (the
 * server answers an op it already committed with its original ack).
 */
import { Doc, type Op } from '@raftkit/crdt';

export type State = 'connecting' | 'syncing' | 'live' | 'offline' | 'closed';

export interface PresenceMessage {
  readonly user_id: string;
  readonly cursor: number | null;
  readonly selection?: { anchor: number; head: number };
  readonly color?: string;
}

export interface SessionOptions {
  /** HTTP base URLs of workers to try, first one first (ws:// is derived from each). */
  readonly workers: readonly string[];
  readonly docId: string;
  readonly userId: string;
  readonly token: string;
  /** Remote ops were applied to `session.doc`. */
  readonly onRemote: (ops: readonly Op[]) => void;
  readonly onState: (state: State, detail: string) => void;
  readonly onPresence: (p: PresenceMessage) => void;
  readonly onError: (code: string, message: string) => void;
  /** A snapshot arrived (joined or rejoined): the document is loaded; `readOnly` as the server said. */
  readonly onSnapshot: (readOnly: boolean) => void;
  /** The server refused an edit as read-only. */
  readonly onReadOnly: () => void;
}

interface Pending {
  readonly op_id: string;
  readonly op: readonly Op[];
  readonly parent_revision: number;
}

/** Close codes after which reconnecting cannot help. */
const FINAL_CLOSES = new Map([
  [4001, 'unauthorised'],
  [4003, 'permission revoked'],
  [4404, 'no such document'],
]);

function base64ToBytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export class Session {
  readonly doc: Doc;
  private ws: WebSocket | null = null;
  private revision = 0;
  private readonly pending: Pending[] = [];
  private workers: string[];
  private attempt = 0;
  private wantOnline = true;
  private closed = false;
  private serverState: 'syncing' | 'live' = 'syncing';
  private joined = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private ackTimer: ReturnType<typeof setTimeout> | null = null;
  private lastPresenceSent = 0;
  private presenceTimer: ReturnType<typeof setTimeout> | null = null;
  private nextPresence: { cursor_pos: number; selection?: { anchor: number; head: number } } | null = null;

  constructor(private readonly opts: SessionOptions) {
    // One replica per page load: the client id must be unique per editing session (the CRDT's rule).
    const rand = Math.random().toString(36).slice(2, 8);
    this.doc = new Doc(`${opts.userId}~${rand}`);
    this.workers = [...opts.workers];
    this.connect();
  }

  /** Ops of one local change, already applied to `doc`. */
  submit(op: readonly Op[]): void {
    if (op.length === 0) return;
    const first = op[0]!;
    const p: Pending = { op_id: `${first.id[0]}:${first.id[1]}`, op, parent_revision: this.revision };
    this.pending.push(p);
    this.send({ type: 'op', ...p });
    this.report();
  }

  /** Cursor and selection in visible indexes; sent at most every 100 ms (the last one wins). */
  presence(cursor_pos: number, selection?: { anchor: number; head: number }): void {
    this.nextPresence = selection ? { cursor_pos, selection } : { cursor_pos };
    const wait = 100 - (Date.now() - this.lastPresenceSent);
    if (this.presenceTimer !== null) return;
    this.presenceTimer = setTimeout(() => {
      this.presenceTimer = null;
      if (this.nextPresence === null) return;
      this.lastPresenceSent = Date.now();
      this.send({ type: 'presence', ...this.nextPresence });
      this.nextPresence = null;
    }, Math.max(0, wait));
  }

  /** Ops typed and not yet acknowledged. */
  get unacknowledged(): number {
    return this.pending.length;
  }

  get lastRevision(): number {
    return this.revision;
  }

  /** Stop talking to the server (edits keep queueing) until `online()`. */
  offline(): void {
    this.wantOnline = false;
    this.dropSocket();
    this.report();
  }

  online(): void {
    if (this.wantOnline || this.closed) return;
    this.wantOnline = true;
    this.attempt = 0;
    this.connect();
  }

  close(): void {
    this.closed = true;
    this.dropSocket();
    this.report();
  }

  private connect(): void {
    if (this.closed || !this.wantOnline || this.ws !== null) return;
    const base = this.workers[this.attempt % this.workers.length]!;
    const url = new URL(`/ws/docs/${encodeURIComponent(this.opts.docId)}`, base);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('token', this.opts.token);
    this.joined = false;
    this.serverState = 'syncing';
    this.report();
    const ws = new WebSocket(url.toString());
    this.ws = ws;
    ws.onopen = () => {
      const join: Record<string, unknown> = { type: 'join', user_id: this.opts.userId };
      if (this.revision > 0) join['since_revision'] = this.revision;
      ws.send(JSON.stringify(join));
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      try {
        this.receive(JSON.parse(String(ev.data)) as Record<string, unknown>);
      } catch (err) {
        this.opts.onError('client', `bad message from server: ${(err as Error).message}`);
      }
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.joined = false;
      const final = FINAL_CLOSES.get(ev.code);
      if (final !== undefined) {
        this.closed = true;
        this.opts.onError(String(ev.code), final);
        this.report();
        return;
      }
      // 1012 (worker moving) and every failure: try the next worker, quickly at first.
      this.attempt++;
      const delay = ev.code === 1012 ? 50 : Math.min(2000, 100 * 2 ** Math.min(this.attempt, 5));
      this.report();
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        void this.refreshWorkers().finally(() => this.connect());
      }, delay);
    };
  }

  /** Learns every worker's URL so a reconnect can go elsewhere (best effort: the list we have stays otherwise). */
  private async refreshWorkers(): Promise<void> {
    try {
      const res = await fetch(new URL('/api/collab/workers', this.workers[0]!), {
        headers: { authorization: `Bearer ${this.opts.token}` },
      });
      if (!res.ok) return;
      const body = (await res.json()) as { workers?: { url: string }[] };
      const urls = (body.workers ?? []).map((w) => w.url).filter((u) => typeof u === 'string');
      if (urls.length > 0) this.workers = [...new Set([...this.opts.workers, ...urls])];
    } catch {
      // The worker we asked is the one that is down: keep the list.
    }
  }

  private receive(msg: Record<string, unknown>): void {
    switch (msg['type']) {
      case 'snapshot': {
        const snap = Doc.decode(base64ToBytes(String(msg['content'])), 'snapshot-reader');
        const missing = snap.opsSince(this.doc.stateVector());
        this.doc.apply(missing);
        this.revision = Math.max(this.revision, Number(msg['revision']));
        this.joined = true;
        this.attempt = 0;
        this.opts.onSnapshot(msg['read_only'] === true);
        // Everything typed while away (or not acknowledged before the break) goes again, in order.
        for (const p of this.pending) this.send({ type: 'op', ...p });
        this.serverState = 'live';
        break;
      }
      case 'op': {
        const ops = msg['op'] as Op[];
        this.doc.apply(ops);
        this.bump(Number(msg['revision']));
        this.opts.onRemote(ops);
        break;
      }
      case 'ack': {
        const i = this.pending.findIndex((p) => p.op_id === msg['op_id']);
        if (i >= 0) this.pending.splice(i, 1);
        this.bump(Number(msg['revision']));
        break;
      }
      case 'presence':
        this.opts.onPresence(msg as unknown as PresenceMessage);
        break;
      case 'status':
        this.serverState = msg['state'] === 'live' ? 'live' : 'syncing';
        break;
      case 'error': {
        const opId = msg['op_id'];
        // A refused op is never going to be accepted: drop it from the queue so it is not resent for ever.
        if (typeof opId === 'string') {
          const i = this.pending.findIndex((p) => p.op_id === opId);
          if (i >= 0) this.pending.splice(i, 1);
        }
        if (msg['code'] === 'read_only') this.opts.onReadOnly();
        this.opts.onError(String(msg['code']), String(msg['message']));
        break;
      }
    }
    this.report();
  }

  private bump(revision: number): void {
    if (!Number.isFinite(revision) || revision <= this.revision) return;
    this.revision = revision;
    // Tell the server how far we got, not on every op.
    if (this.ackTimer === null)
      this.ackTimer = setTimeout(() => {
        this.ackTimer = null;
        this.send({ type: 'ack', ack_revision: this.revision });
      }, 200);
  }

  private send(msg: Record<string, unknown>): void {
    if (this.ws !== null && this.ws.readyState === WebSocket.OPEN && (this.joined || msg['type'] === 'join'))
      this.ws.send(JSON.stringify(msg));
  }

  private dropSocket(): void {
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const ws = this.ws;
    this.ws = null;
    this.joined = false;
    if (ws !== null) ws.close(1000);
  }

  private report(): void {
    let state: State;
    let detail = '';
    if (this.closed) state = 'closed';
    else if (!this.wantOnline) {
      state = 'offline';
      detail = this.pending.length > 0 ? `${this.pending.length} change(s) waiting` : '';
    } else if (this.ws === null || this.ws.readyState !== WebSocket.OPEN) state = this.joined ? 'syncing' : this.attempt > 0 ? 'offline' : 'connecting';
    else if (!this.joined || this.serverState === 'syncing' || this.pending.length > 0) {
      state = 'syncing';
      detail = this.pending.length > 0 ? `${this.pending.length} change(s) waiting` : '';
    } else state = 'live';
    this.opts.onState(state, detail);
  }
}
