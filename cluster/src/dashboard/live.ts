/**
 * GET /api/live: one WebSocket per page, fed by the collector's ticks. Every socket gets the same serialized
 * messages (one JSON.stringify per tick whatever the number of tabs), and never more than one update per
 * MIN_GAP_MS: a tick that lands sooner after a socket's last update is held, its events kept for the next one.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { pushOrDrop } from '@raftkit/http';
import type { Collector } from './collector.js';
import type { Timeline } from './timeline.js';
import type { Overview, TimelineEvent } from './types.js';

const MIN_GAP_MS = 1_000;
const MAX_SOCKETS = 2_000;
/** A page that does not read gets dropped past this much queued (it reconnects and resyncs from the overview). */
const MAX_UNSENT = 2 * 1024 * 1024;
/** Events held for a socket between two updates. */
const MAX_PENDING = 1_000;

interface Client {
  socket: WebSocket;
  lastSentAt: number;
  /** The update (counters.updates) this socket was last sent: a held update is sent once. */
  sentUpdate: number;
  pending: TimelineEvent[];
}

export class LiveHub {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 });
  private readonly clients = new Set<Client>();
  private latest: Overview;
  private flushTimer: NodeJS.Timeout | null = null;
  private readonly unsubscribe: () => void;
  readonly counters = { messagesSent: 0, updates: 0 };

  constructor(
    private readonly collector: Collector,
    private readonly timeline: Timeline,
  ) {
    this.latest = collector.overview();
    this.unsubscribe = collector.onTick((overview, events) => this.update(overview, events));
  }

  get size(): number {
    return this.clients.size;
  }

  /** Takes an upgrade the server has already authorized. */
  accept(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.clients.size >= MAX_SOCKETS) {
      socket.end(
        'HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"code":"unavailable","message":"too many live connections"}}',
      );
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const client: Client = { socket: ws, lastSentAt: 0, sentUpdate: -1, pending: [] };
      this.clients.add(client);
      // An open page keeps the collector polling; the last one closing lets it park.
      this.collector.watch(1);
      ws.on('close', () => {
        if (this.clients.delete(client)) this.collector.watch(-1);
      });
      ws.on('error', () => ws.terminate());
      // Pages send nothing; anything they do send is ignored (maxPayload bounds it).
      // The first update at once, with the recent timeline, so a page has something to draw.
      this.send(client, this.overviewText(), this.timeline.since(Math.max(0, this.timeline.lastSeq - 200)));
    });
  }

  private overviewText(): string {
    return JSON.stringify({ type: 'overview', overview: this.latest });
  }

  private update(overview: Overview, events: TimelineEvent[]): void {
    this.latest = overview;
    this.counters.updates++;
    for (const c of this.clients) {
      c.pending.push(...events);
      if (c.pending.length > MAX_PENDING) c.pending.splice(0, c.pending.length - MAX_PENDING);
    }
    this.flush();
  }

  /** Sends to every socket whose last update is at least MIN_GAP_MS old; schedules the others. */
  private flush(): void {
    const now = Date.now();
    let text: string | null = null;
    let wait = Infinity;
    for (const c of this.clients) {
      const due = c.lastSentAt + MIN_GAP_MS - now;
      if (due > 0) {
        wait = Math.min(wait, due);
        continue;
      }
      if (c.sentUpdate === this.counters.updates) continue;
      this.send(c, (text ??= this.overviewText()), c.pending);
    }
    if (wait !== Infinity && this.flushTimer === null) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = null;
        this.flush();
      }, wait + 5);
    }
  }

  private send(c: Client, overviewText: string, events: TimelineEvent[]): void {
    if (c.socket.readyState !== c.socket.OPEN) return;
    c.lastSentAt = Date.now();
    c.sentUpdate = this.counters.updates;
    if (!pushOrDrop(c.socket, overviewText, MAX_UNSENT)) return;
    this.counters.messagesSent++;
    if (events.length > 0) {
      pushOrDrop(c.socket, JSON.stringify({ type: 'timeline', events }), MAX_UNSENT);
      this.counters.messagesSent++;
    }
    c.pending = [];
  }

  close(): void {
    this.unsubscribe();
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    for (const c of this.clients) c.socket.terminate();
    for (let i = 0; i < this.clients.size; i++) this.collector.watch(-1);
    this.clients.clear();
    this.wss.close();
  }
}
