/**
 * The page's calls to the dashboard server. Data arrives over ONE WebSocket (/api/live, pushed at most once a
 * second); the page fetches the timeline and the jepsen-like runs once at start and when it needs to (another
 * cluster picked, the socket back after a gap, a refresh asked), so a tab never polls.
 */
import type { FaultRequest, JepsenRun, LiveMessage, Overview, TimelineEvent } from './types.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await fetch(path, init);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    // Not JSON: reported below with the status.
  }
  if (!res.ok) {
    const error = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
    throw new ApiError(res.status, error?.code ?? 'http_' + res.status, error?.message ?? (text || res.statusText));
  }
  return parsed as T;
}

/** Trades the token for the session cookie (HttpOnly: the page never holds it). */
export function login(token: string): Promise<void> {
  return request<void>('POST', '/api/login', { token });
}

export function fetchOverview(): Promise<Overview> {
  return request<Overview>('GET', '/api/overview');
}

export async function fetchTimeline(cluster: string, since?: number): Promise<TimelineEvent[]> {
  const q = new URLSearchParams({ cluster });
  if (since !== undefined) q.set('since', String(since));
  return (await request<{ events: TimelineEvent[] }>('GET', `/api/timeline?${q}`)).events;
}

export async function fetchJepsen(): Promise<JepsenRun[]> {
  return (await request<{ runs: JepsenRun[] }>('GET', '/api/jepsen')).runs;
}

interface FaultAnswer {
  ok: true;
  event: TimelineEvent;
  /** What the action did not fully manage (a member it could not reach...), as the CLI prints it. */
  warnings?: string[];
}

export function postFault(cluster: string, fault: FaultRequest): Promise<FaultAnswer> {
  return request<FaultAnswer>('POST', `/api/clusters/${encodeURIComponent(cluster)}/faults`, fault);
}

export type LiveStatus = 'connecting' | 'live' | 'reconnecting';

interface LiveHandlers {
  message(m: LiveMessage): void;
  status(s: LiveStatus): void;
  /** The socket opened again after being closed: the page refetches what it may have missed. */
  reopened(): void;
  /** Several attempts failed in a row: maybe the session is gone (the server restarted). */
  failing(): void;
}

/**
 * The live socket, reopened with a growing delay (1 s up to 10 s) when it closes, so a dashboard server restart or
 * a sleeping laptop costs one attempt every few seconds, not a storm.
 */
export class Live {
  private socket: WebSocket | null = null;
  private failures = 0;
  private everOpen = false;
  private closed = false;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly handlers: LiveHandlers) {}

  start(): void {
    this.closed = false;
    this.open();
  }

  stop(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.socket?.close();
    this.socket = null;
  }

  private open(): void {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const socket = new WebSocket(`${scheme}://${location.host}/api/live`);
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.failures = 0;
      this.handlers.status('live');
      if (this.everOpen) this.handlers.reopened();
      this.everOpen = true;
    };
    socket.onmessage = (e) => {
      if (typeof e.data !== 'string') return;
      let m: LiveMessage;
      try {
        m = JSON.parse(e.data) as LiveMessage;
      } catch {
        return;
      }
      this.handlers.message(m);
    };
    socket.onclose = () => {
      if (this.socket !== socket || this.closed) return;
      this.socket = null;
      if (!opened) this.failures++;
      this.handlers.status('reconnecting');
      if (this.failures >= 2) this.handlers.failing();
      const delay = Math.min(10_000, 1000 * 2 ** Math.min(this.failures, 4));
      this.timer = setTimeout(() => this.open(), opened ? 1000 : delay);
    };
  }
}
