/**
 * The op log of the documents one Raft group serves (documents are spread over groups by hash of doc_id). Pure and
 * deterministic: time comes from the entry (the leader's stamp), so leases, idle snapshots and the 7-day hot window
 * give the same result on every member; nothing here reads a clock, a file or a socket.
 *
 * Per document it holds the metadata and permissions, the CRDT state (a Doc: the "snapshot" every join is served
 * from), the hot tail of committed changes (revision = position: change k is revision k), op_id dedup, the owner's
 * lease and generation (the fencing token: an append carrying another generation is refused), named versions and
 * comments. One "change" is one user edit: the Op[] of one client message, committed whole or not at all.
 */
import { Packr } from 'msgpackr';
import { checkOp, Doc, InvalidOpError, opLength, type Id, type Op, type Span } from '@raftkit/crdt';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { checkCommand } from './commands.js';
import { MAX_CHARS, type ChangeInput, type CollabCommand, type Role } from './vocabulary.js';

export {
  MAX_CHARS,
  MAX_CHANGES_PER_APPEND,
  MAX_COMMENT_CHARS,
  MAX_TITLE_CHARS,
  USER_ID,
  DOC_ID,
  ROLES,
  type ChangeInput,
  type CollabCommand,
  type Role,
} from './vocabulary.js';

/** Ops in one change (one client message); a paste is one insert op, so this is generous. */
export const MAX_OPS_PER_CHANGE = 1_000;
/** Owner sessions per document whose append sequence is remembered (the live one and a few ended ones). */
const MAX_APPEND_SESSIONS = 8;
export const LEASE_MS = 3_000;
/** An implicit snapshot (a compaction point) every this many changes... */
export const SNAPSHOT_EVERY = 500;
/** ...or once a document has been idle this long with changes since the last one. */
export const IDLE_SNAPSHOT_MS = 5 * 60_000;
/** Changes older than this and behind an implicit snapshot are dropped from the hot log. */
export const HOT_MS = 7 * 24 * 3600_000;
const MAX_NAMED_SNAPSHOTS = 100;
const MAX_COMMENTS = 1_000;
/**
 * Documents one user may own (the workers' `max_docs_per_user` setting, carried by each `create` so every replica
 * decides alike). A user's documents all live in one group (the worker picks a doc_id that hashes there), so the
 * count is exact.
 */
export const MAX_DOCS_PER_USER = 100;
/** The client id the log itself writes with (templates, restores): a user's client ids never contain '~' at the start. */
export const SERVER_CLIENT = '~server';

const RANK: Record<Role | 'none', number> = { none: 0, viewer: 1, commenter: 2, editor: 3 };

/** Whether `role` is at least `need`. */
export function atLeast(role: Role | null, need: Role): boolean {
  return RANK[role ?? 'none'] >= RANK[need];
}

/** A user's client ids are the user id itself or `${user}~${session}`: an op's id names who wrote it. */
export function clientBelongsTo(client: string, user: string): boolean {
  return client === user || client.startsWith(`${user}~`);
}

export interface ChangeEntry {
  revision: number;
  op_id: string;
  author: string;
  ops: Op[];
  parent_revision: number;
  time: number;
}

export interface Owner {
  worker: string;
  url: string;
  generation: number;
  expires: number;
}

export interface NamedSnapshot {
  snapshot_id: string;
  revision: number;
  name: string;
  time: number;
  spans: Span[];
}

export interface Comment {
  comment_id: string;
  author: string;
  start: Id;
  end: Id;
  body: string;
  created_at: number;
}

export interface DocMeta {
  doc_id: string;
  title: string;
  owner: string;
  created_at: number;
  last_modified: number;
  revision: number;
  length: number;
}

interface DocState {
  meta: DocMeta;
  permissions: Map<string, Role>;
  doc: Doc;
  /** Hot changes, revisions logStart+1 .. meta.revision, oldest first. */
  log: ChangeEntry[];
  logStart: number;
  opIds: Map<string, number>;
  owner: Owner | null;
  /** The last generation granted (kept after a release, so generations never repeat). */
  generation: number;
  /** Last implicit snapshot: revision and time. */
  implicit: { revision: number; time: number };
  named: NamedSnapshot[];
  comments: Comment[];
  nextId: number;
  /**
   * Per owner session (most recent last): the last append sequence number applied. An owner keeps several append
   * entries in flight; the sequence keeps the log in the owner's order whatever order they reach the leader in.
   */
  appendSeqs: Array<[session: string, seq: number]>;
}

export type ChangeResult =
  | { ok: true; op_id: string; revision: number; duplicate: boolean }
  | { ok: false; op_id: string; code: 'invalid_op' | 'too_large' | 'forbidden'; message: string };

export type Failure = {
  ok: false;
  code: 'no_such_doc' | 'exists' | 'stale_generation' | 'not_found' | 'invalid' | 'too_many' | 'out_of_order' | 'quota';
  message: string;
};

export type CollabResult =
  | Failure
  | { ok: true; op: 'create'; meta: DocMeta }
  | { ok: true; op: 'delete'; owner: Owner | null }
  | { ok: true; op: 'acquire'; granted: boolean; owner: Owner }
  | { ok: true; op: 'renew'; lost: string[] }
  | { ok: true; op: 'release' }
  | { ok: true; op: 'append'; base: number; results: ChangeResult[] }
  | { ok: true; op: 'snapshot'; snapshot_id: string; revision: number }
  | { ok: true; op: 'restore'; revision: number; entry: ChangeEntry | null }
  | { ok: true; op: 'permission'; user: string; role: Role | null }
  | { ok: true; op: 'comment'; comment: Comment }
  | { ok: true; op: 'uncomment' }
  | { ok: true; op: 'compact'; snapshots: number; dropped: number };

const packr = new Packr({ useRecords: false });

const fail = (code: Failure['code'], message: string): Failure => ({ ok: false, code, message });

export class CollabMachine implements StateMachine<CollabCommand, CollabResult> {
  private docs = new Map<string, DocState>();
  /** Documents per owner (derived from `docs`: rebuilt on restore, never stored). */
  private owned = new Map<string, number>();

  /** How many documents `user` owns in this group. */
  ownedBy(user: string): number {
    return this.owned.get(user) ?? 0;
  }

  private countOwner(user: string, delta: number): void {
    const n = (this.owned.get(user) ?? 0) + delta;
    if (n > 0) this.owned.set(user, n);
    else this.owned.delete(user);
  }

  /** Document ids held, for tests and listings. */
  docIds(): string[] {
    return [...this.docs.keys()];
  }

  meta(docId: string): DocMeta | null {
    const d = this.docs.get(docId);
    return d === undefined ? null : { ...d.meta, length: d.doc.length };
  }

  /** The role of `user` on a document: the owner is an editor; null without access or without the document. */
  role(docId: string, user: string): Role | null {
    const d = this.docs.get(docId);
    if (d === undefined) return null;
    if (d.meta.owner === user) return 'editor';
    return d.permissions.get(user) ?? null;
  }

  permissions(docId: string): Array<{ user: string; role: Role }> | null {
    const d = this.docs.get(docId);
    if (d === undefined) return null;
    return [
      { user: d.meta.owner, role: 'editor' as Role },
      ...[...d.permissions].filter(([u]) => u !== d.meta.owner).map(([user, role]) => ({ user, role })),
    ];
  }

  /** Documents `user` may read (null: every document, for the cluster token). */
  list(user: string | null): DocMeta[] {
    const out: DocMeta[] = [];
    for (const d of this.docs.values())
      if (user === null || d.meta.owner === user || d.permissions.has(user))
        out.push({ ...d.meta, length: d.doc.length });
    return out;
  }

  owner(docId: string): Owner | null {
    return this.docs.get(docId)?.owner ?? null;
  }

  text(docId: string): string | null {
    return this.docs.get(docId)?.doc.text() ?? null;
  }

  /**
   * What an owner loads or a reconnecting client needs: the encoded document at the current revision and the hot
   * changes after `since` (null when `since` is older than the hot log: the document alone must do).
   */
  state(
    docId: string,
    since: number | null,
  ): { meta: DocMeta; content: Uint8Array; changes: ChangeEntry[] | null; log_start: number } | null {
    const d = this.docs.get(docId);
    if (d === undefined) return null;
    let changes: ChangeEntry[] | null = null;
    if (since !== null && since >= d.logStart) changes = d.log.slice(Math.max(0, since - d.logStart));
    return { meta: { ...d.meta, length: d.doc.length }, content: d.doc.encode(), changes, log_start: d.logStart };
  }

  snapshots(docId: string): Array<Omit<NamedSnapshot, 'spans'>> | null {
    const d = this.docs.get(docId);
    return d === undefined ? null : d.named.map(({ spans: _spans, ...rest }) => rest);
  }

  comments(docId: string): Array<Comment & { range: { index: number; length: number } | null }> | null {
    const d = this.docs.get(docId);
    if (d === undefined) return null;
    return d.comments.map((c) => {
      const a = d.doc.indexOf(c.start);
      const b = d.doc.indexOf(c.end);
      // The anchored text as it reads now: from the first anchor to the last (null when all of it was deleted).
      const range =
        a === null || b === null
          ? null
          : b.index + (b.visible ? 1 : 0) > a.index
            ? { index: a.index, length: b.index + (b.visible ? 1 : 0) - a.index }
            : null;
      return { ...c, range };
    });
  }

  /** Hot-log bookkeeping, for tests and status. */
  logInfo(docId: string): { log_start: number; held: number; implicit_revision: number; generation: number } | null {
    const d = this.docs.get(docId);
    return d === undefined
      ? null
      : { log_start: d.logStart, held: d.log.length, implicit_revision: d.implicit.revision, generation: d.generation };
  }

  apply(command: CollabCommand, context: ApplyContext): CollabResult {
    const time = context.time;
    try {
      checkCommand(command);
    } catch (error) {
      return fail('invalid', (error as Error).message);
    }
    switch (command.op) {
      case 'create':
        return this.create(command, time);
      case 'delete': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        this.docs.delete(command.doc_id);
        this.countOwner(d.meta.owner, -1);
        return { ok: true, op: 'delete', owner: d.owner };
      }
      case 'acquire':
        return this.acquire(command, time);
      case 'renew': {
        const lost: string[] = [];
        for (const [docId, generation] of command.docs) {
          const d = this.docs.get(docId);
          if (d?.owner && d.owner.worker === command.worker && d.owner.generation === generation)
            d.owner.expires = time + LEASE_MS;
          else lost.push(docId);
        }
        return { ok: true, op: 'renew', lost };
      }
      case 'release': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        if (d.owner === null || d.owner.worker !== command.worker || d.owner.generation !== command.generation) {
          return fail(
            'stale_generation',
            `generation ${command.generation} of ${command.worker} does not own ${command.doc_id}`,
          );
        }
        // The final snapshot of an idle document: a compaction point at its last revision.
        d.implicit = { revision: d.meta.revision, time };
        d.owner = null;
        this.trim(d, time);
        return { ok: true, op: 'release' };
      }
      case 'append':
        return this.append(command, time);
      case 'snapshot': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        if (d.named.length >= MAX_NAMED_SNAPSHOTS)
          return fail('too_many', `a document keeps at most ${MAX_NAMED_SNAPSHOTS} named versions`);
        const snapshot_id = `v${d.nextId++}`;
        d.named.push({ snapshot_id, revision: d.meta.revision, name: command.name, time, spans: d.doc.spans() });
        return { ok: true, op: 'snapshot', snapshot_id, revision: d.meta.revision };
      }
      case 'restore':
        return this.restoreVersion(command, time);
      case 'permission': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        if (command.user === d.meta.owner) return fail('invalid', 'the owner is always an editor');
        if (command.role === null) d.permissions.delete(command.user);
        else d.permissions.set(command.user, command.role);
        return { ok: true, op: 'permission', user: command.user, role: command.role };
      }
      case 'comment': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        if (d.comments.length >= MAX_COMMENTS)
          return fail('too_many', `a document keeps at most ${MAX_COMMENTS} comments`);
        const a = d.doc.indexOf(command.start);
        const b = d.doc.indexOf(command.end);
        if (a === null || b === null)
          return fail('invalid', 'a comment is anchored on characters of the document (start and end ids)');
        if (b.index < a.index) return fail('invalid', 'the end anchor comes before the start anchor');
        const comment: Comment = {
          comment_id: `c${d.nextId++}`,
          author: command.author,
          start: command.start,
          end: command.end,
          body: command.body,
          created_at: time,
        };
        d.comments.push(comment);
        return { ok: true, op: 'comment', comment };
      }
      case 'uncomment': {
        const d = this.docs.get(command.doc_id);
        if (d === undefined) return fail('no_such_doc', `no document ${command.doc_id}`);
        const i = d.comments.findIndex((c) => c.comment_id === command.comment_id);
        if (i < 0) return fail('not_found', `no comment ${command.comment_id}`);
        d.comments.splice(i, 1);
        return { ok: true, op: 'uncomment' };
      }
      case 'compact': {
        let snapshots = 0;
        let dropped = 0;
        for (const d of this.docs.values()) {
          if (d.implicit.revision < d.meta.revision && time - d.meta.last_modified >= IDLE_SNAPSHOT_MS) {
            d.implicit = { revision: d.meta.revision, time };
            snapshots++;
          }
          dropped += this.trim(d, time);
        }
        return { ok: true, op: 'compact', snapshots, dropped };
      }
      default:
        return fail('invalid', `unknown command ${String((command as { op?: unknown }).op)}`);
    }
  }

  private create(c: Extract<CollabCommand, { op: 'create' }>, time: number): CollabResult {
    if (this.docs.has(c.doc_id)) return fail('exists', `document ${c.doc_id} exists`);
    if (c.max_docs !== undefined && this.ownedBy(c.owner) >= c.max_docs)
      return fail(
        'quota',
        `${c.owner} owns ${this.ownedBy(c.owner)} documents, the most a user may own (${c.max_docs}): delete one first`,
      );
    const d: DocState = {
      meta: {
        doc_id: c.doc_id,
        title: c.title,
        owner: c.owner,
        created_at: time,
        last_modified: time,
        revision: 0,
        length: 0,
      },
      permissions: new Map(),
      doc: new Doc(SERVER_CLIENT),
      log: [],
      logStart: 0,
      opIds: new Map(),
      owner: null,
      generation: 0,
      implicit: { revision: 0, time },
      named: [],
      comments: [],
      nextId: 1,
      appendSeqs: [],
    };
    this.docs.set(c.doc_id, d);
    this.countOwner(c.owner, 1);
    if (c.template !== null && c.template.length > 0) {
      const ops = d.doc.localInsert(0, c.template.slice(0, MAX_CHARS));
      this.commit(d, { op_id: `${SERVER_CLIENT}:${ops[0]!.id[1]}`, author: c.owner, ops, parent_revision: 0 }, time);
    }
    return { ok: true, op: 'create', meta: { ...d.meta, length: d.doc.length } };
  }

  private acquire(c: Extract<CollabCommand, { op: 'acquire' }>, time: number): CollabResult {
    const d = this.docs.get(c.doc_id);
    if (d === undefined) return fail('no_such_doc', `no document ${c.doc_id}`);
    const o = d.owner;
    if (o !== null && o.expires > time) {
      if (o.worker !== c.worker) return { ok: true, op: 'acquire', granted: false, owner: { ...o } };
      o.expires = time + LEASE_MS;
      o.url = c.url;
      return { ok: true, op: 'acquire', granted: true, owner: { ...o } };
    }
    // No owner, or its lease ran out (the worker stopped renewing): a new generation fences the old one off.
    d.generation++;
    d.owner = { worker: c.worker, url: c.url, generation: d.generation, expires: time + LEASE_MS };
    return { ok: true, op: 'acquire', granted: true, owner: { ...d.owner } };
  }

  private append(c: Extract<CollabCommand, { op: 'append' }>, time: number): CollabResult {
    const d = this.docs.get(c.doc_id);
    if (d === undefined) return fail('no_such_doc', `no document ${c.doc_id}`);
    if (d.owner === null || d.owner.generation !== c.generation) {
      return fail(
        'stale_generation',
        `generation ${c.generation} is stale: the document's owner is generation ${d.owner?.generation ?? 'none'}`,
      );
    }
    const base = d.meta.revision;
    if (c.session !== undefined && c.seq !== undefined) {
      const at = d.appendSeqs.findIndex(([s]) => s === c.session);
      const last = at < 0 ? 0 : d.appendSeqs[at]![1];
      if (c.seq > last + 1)
        return fail(
          'out_of_order',
          `append ${c.seq} of session ${c.session} before ${last + 1}: send them again in order`,
        );
      if (c.seq <= last)
        return { ok: true, op: 'append', base, results: c.changes.map((change) => this.replayed(d, change)) };
      if (at >= 0) d.appendSeqs.splice(at, 1);
      d.appendSeqs.push([c.session, c.seq]);
      if (d.appendSeqs.length > MAX_APPEND_SESSIONS) d.appendSeqs.shift();
    }
    const results = c.changes.map((change) => this.change(d, change, time));
    return { ok: true, op: 'append', base, results };
  }

  /**
   * A change of an entry applied before (the owner sent it again, not knowing): its first outcome, never applied
   * now (that would put it after changes the owner sent later). Committed: acknowledged at its revision; else the
   * first answer was a refusal.
   */
  private replayed(d: DocState, c: ChangeInput): ChangeResult {
    const op_id = c.op_id;
    const seen = d.opIds.get(op_id);
    if (seen !== undefined) return { ok: true, op_id, revision: seen, duplicate: true };
    if (
      Array.isArray(c.ops) &&
      c.ops.length > 0 &&
      c.ops.every((op) => op.id[1] + opLength(op) - 1 <= d.doc.lastCounter(op.id[0]))
    )
      return { ok: true, op_id, revision: d.meta.revision, duplicate: true };
    return {
      ok: false,
      op_id,
      code: 'invalid_op',
      message: 'this change was refused when its append entry was first applied',
    };
  }

  /** One change: checked whole before anything of it is applied (except the CRDT's own late anchor check). */
  private change(d: DocState, c: ChangeInput, time: number): ChangeResult {
    const op_id = c.op_id;
    const seen = d.opIds.get(op_id);
    if (seen !== undefined) return { ok: true, op_id, revision: seen, duplicate: true };
    const bad = (code: 'invalid_op' | 'too_large' | 'forbidden', message: string): ChangeResult => ({
      ok: false,
      op_id,
      code,
      message,
    });
    if (!atLeast(this.role(d.meta.doc_id, c.author), 'editor'))
      return bad('forbidden', `${c.author} may not edit this document`);
    if (!Array.isArray(c.ops) || c.ops.length === 0 || c.ops.length > MAX_OPS_PER_CHANGE)
      return bad('invalid_op', `op must be a list of 1..${MAX_OPS_PER_CHANGE} ops`);
    try {
      for (const op of c.ops) checkOp(op);
    } catch (error) {
      return bad('invalid_op', (error as Error).message);
    }
    const first = c.ops[0]!;
    if (op_id !== `${first.id[0]}:${first.id[1]}`)
      return bad('invalid_op', `op_id must be "client:counter" of the first op's id (${first.id[0]}:${first.id[1]})`);
    for (const op of c.ops)
      if (!clientBelongsTo(op.id[0], c.author))
        return bad(
          'forbidden',
          `op id ${op.id[0]} is not a client of ${c.author} (use "${c.author}" or "${c.author}~<session>")`,
        );
    // Applied before (its op_id left the hot log, or it was resent inside another change): every counter is known.
    if (c.ops.every((op) => op.id[1] + opLength(op) - 1 <= d.doc.lastCounter(op.id[0])))
      return { ok: true, op_id, revision: d.meta.revision, duplicate: true };
    // Dependencies: each op continues its client's counters exactly, and anchors on counters already applied, so a
    // change is never left waiting inside the CRDT (which would block that client's later changes for ever). The
    // counters this change's own earlier ops advance are tracked beside the document's (no copy of its state
    // vector per change: it has an entry per client that ever wrote).
    const have = new Map<string, number>();
    const last = (client: string): number => have.get(client) ?? d.doc.lastCounter(client);
    const known = (id: Id | null, n = 1): boolean => id === null || id[1] + n - 1 <= last(id[0]);
    let added = 0;
    for (const op of c.ops) {
      const next = last(op.id[0]) + 1;
      if (op.id[1] !== next)
        return bad(
          'invalid_op',
          `op ${op.id[0]}:${op.id[1]} does not follow that client's last applied counter ${next - 1}: send changes in order, each once`,
        );
      const deps =
        op.type === 'insert'
          ? known(op.left) && known(op.right)
          : op.type === 'delete'
            ? known(op.target, op.length)
            : known(op.start) && known(op.end);
      if (!deps)
        return bad('invalid_op', `op ${op.id[0]}:${op.id[1]} anchors on characters this document does not hold`);
      have.set(op.id[0], op.id[1] + opLength(op) - 1);
      if (op.type === 'insert') added += op.text.length;
    }
    if (d.doc.length + added > MAX_CHARS)
      return bad(
        'too_large',
        `a document holds at most ${MAX_CHARS} characters (it has ${d.doc.length}; this change inserts ${added})`,
      );
    try {
      d.doc.apply(c.ops);
    } catch (error) {
      if (!(error instanceof InvalidOpError)) throw error;
      // The CRDT dropped the ops anchored on delete/format counters and applied the rest (deterministically, on
      // every member): the valid part stays, committed as the change; its author hears invalid_op.
      this.commit(d, c, time);
      return bad('invalid_op', error.message);
    }
    const revision = this.commit(d, c, time);
    return { ok: true, op_id, revision, duplicate: false };
  }

  private commit(d: DocState, c: ChangeInput, time: number): number {
    const revision = ++d.meta.revision;
    d.meta.last_modified = time;
    d.log.push({ revision, op_id: c.op_id, author: c.author, ops: c.ops, parent_revision: c.parent_revision, time });
    d.opIds.set(c.op_id, revision);
    if (revision - d.implicit.revision >= SNAPSHOT_EVERY) {
      d.implicit = { revision, time };
      this.trim(d, time);
    }
    return revision;
  }

  private restoreVersion(c: Extract<CollabCommand, { op: 'restore' }>, time: number): CollabResult {
    const d = this.docs.get(c.doc_id);
    if (d === undefined) return fail('no_such_doc', `no document ${c.doc_id}`);
    const named = d.named.find((s) => s.snapshot_id === c.snapshot_id);
    if (named === undefined) return fail('not_found', `no named version ${c.snapshot_id}`);
    // A forward change written by the log's own client: delete what is there, insert the version's text. Every
    // member computes the same ops from the same state; history stays (the version before is one undo away).
    const ops: Op[] = [];
    if (d.doc.length > 0) ops.push(...d.doc.localDelete(0, d.doc.length));
    let at = 0;
    for (const span of named.spans) {
      ops.push(...d.doc.localInsert(at, span.text, Object.keys(span.attrs).length > 0 ? span.attrs : undefined));
      at += span.text.length;
    }
    if (ops.length === 0) return { ok: true, op: 'restore', revision: d.meta.revision, entry: null };
    const revision = this.commit(
      d,
      { op_id: `${SERVER_CLIENT}:${ops[0]!.id[1]}`, author: c.author, ops, parent_revision: d.meta.revision },
      time,
    );
    return { ok: true, op: 'restore', revision, entry: d.log[d.log.length - 1]! };
  }

  /** Drops hot changes behind the last implicit snapshot and older than HOT_MS; returns how many. */
  private trim(d: DocState, time: number): number {
    let n = 0;
    while (n < d.log.length && d.log[n]!.revision <= d.implicit.revision && time - d.log[n]!.time > HOT_MS) {
      d.opIds.delete(d.log[n]!.op_id);
      n++;
    }
    if (n > 0) {
      d.log = d.log.slice(n);
      d.logStart += n;
    }
    return n;
  }

  snapshot(): Uint8Array {
    return packr.pack(
      [...this.docs.values()].map((d) => ({
        meta: d.meta,
        permissions: [...d.permissions],
        content: d.doc.encode(),
        log: d.log,
        logStart: d.logStart,
        owner: d.owner,
        generation: d.generation,
        implicit: d.implicit,
        named: d.named,
        comments: d.comments,
        nextId: d.nextId,
        appendSeqs: d.appendSeqs,
      })),
    );
  }

  restore(data: Uint8Array): void {
    type Stored = Omit<DocState, 'permissions' | 'doc' | 'opIds' | 'appendSeqs'> & {
      permissions: Array<[string, Role]>;
      content: Uint8Array;
      appendSeqs?: Array<[string, number]>;
    };
    const stored = packr.unpack(data) as Stored[];
    this.docs = new Map();
    this.owned = new Map();
    for (const s of stored) {
      this.countOwner(s.meta.owner, 1);
      const { content, permissions, ...rest } = s;
      this.docs.set(s.meta.doc_id, {
        ...rest,
        permissions: new Map(permissions),
        doc: Doc.decode(content, SERVER_CLIENT),
        opIds: new Map(s.log.map((e) => [e.op_id, e.revision])),
        // Snapshots written before append sequences existed hold none.
        appendSeqs: s.appendSeqs ?? [],
      });
    }
  }
}
