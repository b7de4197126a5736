/**
 * The WebSocket messages of /ws/docs/{doc_id} (the wire contract, docs: README "WebSocket"). Shared by the worker and
 * by the client core, so nothing here may import node-only modules.
 */
import type { Op } from '@raftkit/crdt';

export interface Selection {
  anchor: number;
  head: number;
}

export type ClientMessage =
  | { type: 'join'; user_id: string; since_revision?: number }
  | { type: 'op'; op_id: string; op: Op[]; parent_revision: number }
  | { type: 'presence'; cursor_pos: number | null; selection?: Selection | null }
  | { type: 'ack'; ack_revision: number };

export type ServerMessage =
  | { type: 'snapshot'; revision: number; content: string; read_only?: boolean; role?: string; worker?: string }
  | { type: 'op'; op_id: string; op: Op[]; revision: number; author: string }
  | { type: 'presence'; user_id: string; cursor: number | null; selection?: Selection | null; color: string }
  | { type: 'ack'; op_id: string; revision: number }
  | { type: 'error'; code: string; message: string; op_id?: string }
  | { type: 'status'; state: 'syncing' | 'live' };

/** Close codes. */
export const CLOSE_UNAUTHORISED = 4001;
export const CLOSE_REVOKED = 4003;
export const CLOSE_NO_DOC = 4404;
export const CLOSE_MOVING = 1012;
/** Not in the contract: a client that sent something other than join first, or broke the protocol. */
export const CLOSE_PROTOCOL = 4400;

/** Presence: at most one update per client per this long (more are coalesced: the latest wins)... */
export const PRESENCE_THROTTLE_MS = 100;
/** ...and a user silent this long is announced gone (cursor null). */
export const PRESENCE_EXPIRY_MS = 30_000;
/** Editors of one document; later editors join read-only. */
export const MAX_EDITORS = 100;
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;
/** The owner sends a status frame at least this often; a client hearing nothing for STALE_MS reconnects. */
export const KEEPALIVE_MS = 1_000;
export const STALE_MS = 4_000;
/** A change sent and not acknowledged within this long: the client reconnects (re-sending is safe: op_ids). */
export const ACK_TIMEOUT_MS = 8_000;

const COLORS = [
  '#e6194b',
  '#3cb44b',
  '#4363d8',
  '#f58231',
  '#911eb4',
  '#46f0f0',
  '#f032e6',
  '#bcf60c',
  '#008080',
  '#9a6324',
  '#800000',
  '#000075',
];

/** A user's colour: the same on every worker (a hash of the user id). */
export function colorOf(user: string): string {
  let h = 0;
  for (let i = 0; i < user.length; i++) h = (Math.imul(h, 31) + user.charCodeAt(i)) >>> 0;
  return COLORS[h % COLORS.length]!;
}

/** Parses a client frame into a ClientMessage, or a reason it is not one. */
export function parseClientMessage(text: string): ClientMessage | string {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return 'a frame is one JSON message';
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return 'a message is a JSON object';
  const o = m as Record<string, unknown>;
  const int = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
  switch (o.type) {
    case 'join':
      if (typeof o.user_id !== 'string') return 'join: user_id (string) is required';
      if (o.since_revision !== undefined && o.since_revision !== null && !int(o.since_revision))
        return 'join: since_revision is a revision (integer >= 0)';
      return {
        type: 'join',
        user_id: o.user_id,
        ...(int(o.since_revision) ? { since_revision: o.since_revision as number } : {}),
      };
    case 'op':
      if (typeof o.op_id !== 'string' || o.op_id.length === 0 || o.op_id.length > 300)
        return 'op: op_id (string) is required';
      if (!Array.isArray(o.op)) return 'op: op is a list of ops';
      if (!int(o.parent_revision)) return 'op: parent_revision is a revision (integer >= 0)';
      return { type: 'op', op_id: o.op_id, op: o.op as Op[], parent_revision: o.parent_revision as number };
    case 'presence': {
      if (o.cursor_pos !== null && !int(o.cursor_pos)) return 'presence: cursor_pos is an index (integer >= 0) or null';
      const s = o.selection as Record<string, unknown> | null | undefined;
      if (s !== undefined && s !== null && (typeof s !== 'object' || !int(s.anchor) || !int(s.head)))
        return 'presence: selection is {anchor, head}';
      return {
        type: 'presence',
        cursor_pos: o.cursor_pos as number | null,
        ...(s ? { selection: { anchor: s.anchor as number, head: s.head as number } } : {}),
      };
    }
    case 'ack':
      if (!int(o.ack_revision)) return 'ack: ack_revision is a revision (integer >= 0)';
      return { type: 'ack', ack_revision: o.ack_revision as number };
    default:
      return `unknown message type ${JSON.stringify(o.type)?.slice(0, 40)}`;
  }
}
