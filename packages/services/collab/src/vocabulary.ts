/**
 * The editor's command vocabulary: what a CollabCommand is and the limits its fields obey. Below both the machine
 * (which applies commands) and the shape check (commands.ts), so neither imports the other.
 */
import type { Id, Op } from '@raftkit/crdt';

export const MAX_CHARS = 100_000;

/** Changes one append entry may carry (the owner batches what queued while its window of entries in flight was full). */
export const MAX_CHANGES_PER_APPEND = 500;

export const MAX_COMMENT_CHARS = 10_000;

export const MAX_TITLE_CHARS = 200;

export const USER_ID = /^[A-Za-z0-9._-]{1,64}$/;

export const DOC_ID = /^[A-Za-z0-9_-]{1,64}$/;

export type Role = 'viewer' | 'commenter' | 'editor';

export const ROLES: readonly Role[] = ['viewer', 'commenter', 'editor'];

export interface ChangeInput {
  op_id: string;
  author: string;
  ops: Op[];
  parent_revision: number;
}

export type CollabCommand =
  /** `max_docs`: refused with `quota` when the owner already owns that many documents in this group. */
  | { op: 'create'; doc_id: string; title: string; owner: string; template: string | null; max_docs?: number }
  /** Removes the document and everything about it (its state, log, versions, comments, lease). */
  | { op: 'delete'; doc_id: string }
  | { op: 'acquire'; doc_id: string; worker: string; url: string }
  | { op: 'renew'; worker: string; docs: Array<[doc_id: string, generation: number]> }
  | { op: 'release'; doc_id: string; worker: string; generation: number }
  /**
   * `session`/`seq` (optional, together): the owner session's id and this entry's number in it (1, 2, ...). An
   * entry is applied only right after the previous one of its session (`out_of_order` otherwise); one whose number
   * was applied already changes nothing and reports each change's first outcome.
   */
  | { op: 'append'; doc_id: string; generation: number; changes: ChangeInput[]; session?: string; seq?: number }
  | { op: 'snapshot'; doc_id: string; name: string }
  | { op: 'restore'; doc_id: string; snapshot_id: string; author: string }
  | { op: 'permission'; doc_id: string; user: string; role: Role | null }
  | { op: 'comment'; doc_id: string; author: string; start: Id; end: Id; body: string }
  | { op: 'uncomment'; doc_id: string; comment_id: string; by: string }
  /** Idle implicit snapshots and hot-log trimming, at the entry's time (the leader proposes it now and then). */
  | { op: 'compact' };
