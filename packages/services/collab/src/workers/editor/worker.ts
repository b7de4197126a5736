/**
 * A collab worker process: the public HTTP API (src/workers/editor/http.ts), the editor page, and /ws/docs/{doc_id}. Each active
 * document is owned by one worker, granted through the op log with a generation (fencing token) and a lease of
 * LEASE_MS renewed every second. A client may connect to any worker: the owner serves it; any other worker proxies
 * the socket to the owner (frames pass through unchanged), or takes the document over when the owner's lease has
 * run out (a dead owner is replaced about LEASE_MS after its last renewal).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import {
  clusterUrl,
  serveWorkerHttp,
  verifyToken,
  type Principal,
  type RunningWorker,
  type WorkerOptions,
} from '@raftkit/http';
import { collabApi } from './http.js';
import { EarlyFrames } from './early-frames.js';
import { asBuffer, pushText } from './frames.js';
import { LogAccess } from './log-access.js';
import { DOC_ID, USER_ID, LEASE_MS, MAX_DOCS_PER_USER, type CollabResult } from '../../machine.js';
import {
  CLOSE_MOVING,
  CLOSE_NO_DOC,
  CLOSE_PROTOCOL,
  CLOSE_REVOKED,
  CLOSE_UNAUTHORISED,
  MAX_EDITORS,
  MAX_FRAME_BYTES,
  parseClientMessage,
  type ClientMessage,
} from '../../protocol.js';
import { appendStats, DocSession, MAX_UNSENT_BYTES, send, type Conn } from './session.js';
import { DEFAULT_GROUPS, groupName } from '../../placement.js';

/** Internal header: this socket comes from another worker's proxy (never proxy it again). */
const PROXY_HEADER = 'x-collab-proxy';
const RENEW_EVERY_MS = 1_000;
const JOIN_TIMEOUT_MS = 10_000;
/** How long a worker keeps trying to reach or replace a document's owner before giving the client a 1012. */
const TAKEOVER_MS = 4 * LEASE_MS;

export interface WorkerSettings {
  groups: number;
  /** A document with no client for this long is released (after a final snapshot). */
  idleReleaseMs: number;
  permissionCheckMs: number;
  /** Editors per document before later ones join read-only (the spec's 100; a setting so tests need not open 100). */
  maxEditors: number;
  /** Documents one user may own (`max_docs_per_user`). */
  maxDocsPerUser: number;
}

function settingsOf(raw: Record<string, string>): WorkerSettings {
  const num = (key: string, fallback: number, min: number, max: number): number => {
    const v = Number(raw[key]);
    return raw[key] !== undefined && Number.isInteger(v) && v >= min && v <= max ? v : fallback;
  };
  return {
    groups: num('groups', DEFAULT_GROUPS, 1, 64),
    idleReleaseMs: num('idle_release_ms', 60_000, 1_000, 86_400_000),
    permissionCheckMs: num('permission_check_ms', 10_000, 500, 600_000),
    maxEditors: num('max_editors', MAX_EDITORS, 1, 10_000),
    maxDocsPerUser: num('max_docs_per_user', MAX_DOCS_PER_USER, 1, 1_000_000),
  };
}

class CollabWorker {
  readonly sessions = new Map<string, DocSession>();
  private readonly opening = new Map<string, Promise<DocSession | null>>();
  readonly settings: WorkerSettings;
  readonly url: string;

  constructor(
    readonly options: WorkerOptions,
    readonly log: LogAccess,
  ) {
    this.settings = settingsOf(options.settings);
    this.url = `http://${options.httpAddress}`;
  }

  get clusterToken(): string {
    return this.options.tokens[0] ?? '';
  }

  groups(): string[] {
    return Array.from({ length: this.settings.groups }, (_, i) => groupName(i));
  }

  /** The session of a document this worker owns, acquiring it when nobody else holds a live lease. */
  async own(docId: string): Promise<{ session: DocSession } | { owner: { worker: string; url: string } } | null> {
    const current = this.sessions.get(docId);
    if (current !== undefined && !current.isEnded) return { session: current };
    let opening = this.opening.get(docId);
    if (opening === undefined) {
      opening = (async () => {
        const result: CollabResult = await this.log.command(docId, {
          op: 'acquire',
          doc_id: docId,
          worker: this.options.id,
          url: this.url,
        });
        if (!result.ok) {
          if (result.code === 'no_such_doc') return null;
          throw new Error(result.message);
        }
        if (result.op !== 'acquire') throw new Error('unexpected acquire result');
        if (!result.granted) throw new OwnedElsewhere(result.owner.worker, result.owner.url);
        const session = await DocSession.open(docId, result.owner.generation, this.log, this.settings.maxEditors, {
          ended: (s) => {
            if (this.sessions.get(s.docId) === s) this.sessions.delete(s.docId);
          },
          log: (level, message, fields) => this.options.logger.log(level, message, fields),
        });
        if (session !== null) {
          this.sessions.set(docId, session);
          this.options.logger.log('info', 'document owned', { doc: docId, generation: result.owner.generation });
        }
        return session;
      })();
      this.opening.set(docId, opening);
      opening.finally(() => this.opening.delete(docId)).catch(() => undefined);
    }
    try {
      const session = await opening;
      return session === null ? null : { session };
    } catch (error) {
      if (error instanceof OwnedElsewhere) return { owner: { worker: error.worker, url: error.url } };
      throw error;
    }
  }

  /** Renews the leases of every owned document, one command per group; documents the log says are lost end. */
  async renew(): Promise<void> {
    const byGroup = new Map<string, Array<[string, number]>>();
    for (const s of this.sessions.values()) {
      const g = await this.log.groupOf(s.docId);
      byGroup.set(g, [...(byGroup.get(g) ?? []), [s.docId, s.generation]]);
    }
    await Promise.all(
      [...byGroup].map(async ([group, docs]) => {
        try {
          const result = await this.log.groupCommand(group, { op: 'renew', worker: this.options.id, docs });
          if (result.ok && result.op === 'renew') {
            for (const docId of result.lost) {
              const s = this.sessions.get(docId);
              if (s !== undefined && docs.some(([d, g]) => d === docId && g === s.generation))
                s.end(CLOSE_MOVING, 'ownership lost');
            }
          }
        } catch (error) {
          this.options.logger.log('warn', 'lease renewal failed', {
            group,
            error: String((error as Error).message ?? error),
          });
        }
      }),
    );
  }

  /** Releases documents idle for idleReleaseMs (the log takes a final snapshot); rechecks permissions. */
  async housekeeping(now: number, recheck: boolean): Promise<void> {
    for (const s of [...this.sessions.values()]) {
      s.expirePresence(now);
      s.keepalive(now);
      if (s.idleSince !== null && now - s.idleSince >= this.settings.idleReleaseMs) {
        s.end(CLOSE_MOVING, 'released');
        await this.log
          .command(s.docId, { op: 'release', doc_id: s.docId, worker: this.options.id, generation: s.generation })
          .catch(() => undefined);
        this.options.logger.log('info', 'document released', { doc: s.docId });
      } else if (recheck) {
        await s.recheck().catch(() => undefined);
      }
    }
  }

  /** A WebSocket at /ws/docs/{doc_id}: authenticated at the upgrade, then joined, then owned or proxied. */
  handle(ws: WebSocket, req: IncomingMessage, principal: Principal, docId: string): void {
    const proxied = principal.kind === 'cluster' && typeof req.headers[PROXY_HEADER] === 'string';
    let joined = false;
    const backlog = new EarlyFrames();
    const early = backlog.frames;
    const timer = setTimeout(() => {
      if (!joined) ws.close(CLOSE_PROTOCOL, 'join first');
    }, JOIN_TIMEOUT_MS);
    const onFirst = (data: RawData): void => {
      if (joined) {
        if (!backlog.push(data)) ws.close(CLOSE_PROTOCOL, 'too much sent before the join completed');
        return;
      }
      const message = parseClientMessage(data.toString());
      if (typeof message === 'string' || message.type !== 'join') {
        ws.send(
          JSON.stringify({
            type: 'error',
            code: 'invalid_message',
            message: typeof message === 'string' ? message : 'the first message is join',
          }),
        );
        ws.close(CLOSE_PROTOCOL, 'join first');
        return;
      }
      joined = true;
      clearTimeout(timer);
      if (!USER_ID.test(message.user_id) || (principal.kind === 'client' && principal.name !== message.user_id)) {
        ws.send(
          JSON.stringify({
            type: 'error',
            code: 'unauthorised',
            message: 'join.user_id must be the user your token names',
          }),
        );
        ws.close(CLOSE_UNAUTHORISED, 'wrong user');
        return;
      }
      void this.joinDoc(ws, docId, message, data, early, proxied).catch((error: unknown) => {
        this.options.logger.log('warn', 'join failed', {
          doc: docId,
          error: String((error as Error).message ?? error),
        });
        if (ws.readyState === WebSocket.OPEN) ws.close(CLOSE_MOVING, 'try again');
      });
    };
    ws.on('message', onFirst);
    ws.on('close', () => clearTimeout(timer));
    ws.on('error', () => undefined);
  }

  private async joinDoc(
    ws: WebSocket,
    docId: string,
    join: Extract<ClientMessage, { type: 'join' }>,
    joinFrame: RawData,
    early: RawData[],
    proxied: boolean,
  ): Promise<void> {
    if (!proxied) ws.send(JSON.stringify({ type: 'status', state: 'syncing' }));
    const view = await this.log.meta(docId, join.user_id);
    // No access is answered as no document, word for word (as REST's 404): a stranger cannot learn which ids exist.
    if (view === null || view.role === null) return void ws.close(CLOSE_NO_DOC, 'no such document');
    const deadline = Date.now() + TAKEOVER_MS;
    for (;;) {
      if (ws.readyState !== WebSocket.OPEN) return;
      const owned = await this.own(docId);
      if (owned === null) return void ws.close(CLOSE_NO_DOC, 'no such document');
      if ('session' in owned) return this.serve(ws, owned.session, join, view.role, early);
      // Another worker owns it. A proxied socket is never proxied again (the proxy retries).
      if (proxied) return void ws.close(CLOSE_MOVING, 'not the owner');
      const ok = await this.proxy(ws, owned.owner.url, docId, joinFrame, early);
      if (ok) return;
      // The owner did not answer: it may be dead. Its lease runs out within LEASE_MS; then acquire succeeds.
      if (Date.now() > deadline) return void ws.close(CLOSE_MOVING, 'owner unreachable');
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  private serve(
    ws: WebSocket,
    session: DocSession,
    join: Extract<ClientMessage, { type: 'join' }>,
    role: NonNullable<Conn['role']>,
    early: RawData[],
  ): void {
    const conn: Conn = {
      ws,
      user: join.user_id,
      role,
      readOnly: false,
      presenceSentAt: 0,
      presenceTimer: null,
      presence: null,
      lastSeen: Date.now(),
      pending: 0,
    };
    ws.removeAllListeners('message');
    const onMessage = (data: RawData): void => {
      const text = data.toString();
      const message = parseClientMessage(text);
      if (typeof message === 'string') return send(conn, { type: 'error', code: 'invalid_message', message });
      switch (message.type) {
        case 'join':
          return send(conn, { type: 'error', code: 'invalid_message', message: 'already joined' });
        case 'op':
          return session.submit(conn, message.op_id, message.op, message.parent_revision);
        case 'presence':
          return session.presence(conn, message.cursor_pos, message.selection ?? null);
        case 'ack':
          return;
      }
    };
    ws.on('message', onMessage);
    ws.on('close', () => session.leave(conn));
    if (session.isEnded) return void ws.close(CLOSE_MOVING, 'moving');
    session.join(conn, join.since_revision);
    for (const data of early.splice(0)) onMessage(data);
  }

  /** Pipes the socket to the owner's; false when the owner could not be reached (nothing was sent to the client). */
  private proxy(
    ws: WebSocket,
    ownerUrl: string,
    docId: string,
    joinFrame: RawData,
    early: RawData[],
  ): Promise<boolean> {
    return new Promise((resolve) => {
      const upstream = new WebSocket(`${ownerUrl.replace(/^http/, 'ws')}/ws/docs/${encodeURIComponent(docId)}`, {
        headers: { authorization: `Bearer ${this.clusterToken}`, [PROXY_HEADER]: this.options.id },
        maxPayload: MAX_FRAME_BYTES,
        handshakeTimeout: 2_000,
      });
      let opened = false;
      upstream.on('open', () => {
        opened = true;
        resolve(true);
        ws.removeAllListeners('message');
        upstream.send(joinFrame.toString());
        for (const data of early.splice(0)) upstream.send(data.toString());
        // Both ways bounded: an owner that stops reading, or a client, is dropped rather than buffered for.
        ws.on('message', (data) => {
          if (upstream.readyState === WebSocket.OPEN) pushText(upstream, asBuffer(data), MAX_UNSENT_BYTES);
        });
        ws.on('close', () => upstream.close());
        // The client may have gone while the upstream was opening: its close event has passed already.
        if (ws.readyState !== WebSocket.OPEN) upstream.close();
      });
      upstream.on('message', (data) => {
        // The owner's frame relayed as the bytes it came as (no decode and encode again), written with this turn's.
        if (ws.readyState === WebSocket.OPEN) pushText(ws, asBuffer(data), MAX_UNSENT_BYTES);
      });
      upstream.on('close', (code, reason) => {
        if (!opened) return resolve(false);
        // The owner's verdicts pass through; anything else means the document is moving: reconnect.
        const pass =
          code === CLOSE_UNAUTHORISED || code === CLOSE_REVOKED || code === CLOSE_NO_DOC || code === CLOSE_PROTOCOL;
        if (ws.readyState === WebSocket.OPEN)
          ws.close(pass ? code : CLOSE_MOVING, pass ? reason.toString() : 'owner moving');
      });
      upstream.on('error', () => {
        if (!opened) resolve(false);
      });
    });
  }

  /** Ends every session and releases its lease (a graceful stop hands documents over at once): clients reconnect. */
  async stop(): Promise<void> {
    const ended = [...this.sessions.values()];
    for (const s of ended) s.end(CLOSE_MOVING, 'worker stopping');
    await Promise.all(
      ended.map((s) =>
        this.log
          .command(
            s.docId,
            { op: 'release', doc_id: s.docId, worker: this.options.id, generation: s.generation },
            2_000,
          )
          .catch(() => undefined),
      ),
    );
  }
}

class OwnedElsewhere extends Error {
  constructor(
    readonly worker: string,
    readonly url: string,
  ) {
    super(`owned by ${worker}`);
  }
}

/** The token of an upgrade: the Authorization header (programs) or ?token= (browsers cannot set headers). */
function upgradeToken(req: IncomingMessage, url: URL): string | null {
  const header = req.headers.authorization;
  if (typeof header === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (m) return m[1]!;
  }
  return url.searchParams.get('token');
}

function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 404 ? 'Not Found' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export async function startCollabWorker(options: WorkerOptions): Promise<RunningWorker> {
  const log = new LogAccess(
    options.members.map((m) => clusterUrl(m.httpAddress)),
    options.tokens[0] ?? '',
  );
  const worker = new CollabWorker(options, log);
  await log.setup(worker.settings.groups);
  const http = await serveWorkerHttp(options, { health: () => ({ documents: worker.sessions.size }) });
  http.metrics.gauge('collab_documents_owned', 'Documents this worker owns').set(() => worker.sessions.size);
  http.metrics
    .gauge('collab_clients', 'WebSocket clients served by this worker as owner')
    .set(() => [...worker.sessions.values()].reduce((n, s) => n + s.conns.size, 0));
  http.metrics
    .gauge('collab_append_window_max', 'Most append entries one document had in flight at once')
    .set(() => appendStats.maxInFlight);
  const resent = http.metrics.gauge(
    'collab_appends_resent',
    'Append entries sent again: after a failed request (failed) or refused out of order (out_of_order)',
  );
  resent.set(() => appendStats.resentFailed, { reason: 'failed' });
  resent.set(() => appendStats.resentOutOfOrder, { reason: 'out_of_order' });
  http.metrics
    .gauge(
      'collab_appends_refused',
      'Append entries the op log refused outright (4xx): their changes refused to their authors',
    )
    .set(() => appendStats.refused);
  collabApi(http.router, worker);

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  http.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    let url: URL;
    let docId: string;
    try {
      // Hostile input must not throw out of an event handler (that would end the process): bad URLs are a 400.
      url = new URL(req.url ?? '/', 'http://x');
      const m = /^\/ws\/docs\/([^/]+)$/.exec(url.pathname);
      if (m === null) return refuse(socket, 404, 'not_found', 'WebSocket endpoints: /ws/docs/{doc_id}');
      docId = decodeURIComponent(m[1]!);
    } catch {
      return refuse(socket, 400, 'invalid_url', 'not a valid URL');
    }
    if (!DOC_ID.test(docId)) return refuse(socket, 400, 'invalid_doc_id', 'a doc_id is 1..64 of A-Z a-z 0-9 _ -');
    const token = upgradeToken(req, url);
    if (token === null) return refuse(socket, 401, 'unauthorized', 'missing token (Authorization: Bearer, or ?token=)');
    let principal: Principal;
    try {
      principal = verifyToken(token, options.tokens);
    } catch {
      return refuse(socket, 401, 'unauthorized', 'wrong token');
    }
    // An editor socket is a user's (or the cluster token's, for the workers' proxies); a service token names no user.
    if (principal.kind === 'service') return refuse(socket, 403, 'forbidden', 'a service token opens no editor socket');
    try {
      wss.handleUpgrade(req, socket, head, (ws) => worker.handle(ws, req, principal, docId));
    } catch {
      refuse(socket, 400, 'invalid_upgrade', 'not a valid WebSocket upgrade');
    }
  });

  let ticks = 0;
  const timer = setInterval(() => {
    ticks++;
    void worker.renew();
    const recheck = ticks % Math.max(1, Math.round(worker.settings.permissionCheckMs / RENEW_EVERY_MS)) === 0;
    void worker.housekeeping(Date.now(), recheck);
  }, RENEW_EVERY_MS);
  timer.unref();

  return {
    httpPort: http.port,
    async stop() {
      clearInterval(timer);
      await worker.stop();
      wss.close();
      await http.close();
      await log.close();
    },
  };
}
