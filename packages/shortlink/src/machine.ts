/**
 * The link store's replicated state machine: the id allocator and the links. Pure and deterministic: the only
 * time it reads is the entry's leader-stamped time (for nothing but the record of when a delete happened).
 *
 * Invariants (checked by tests): the allocator's counter only grows, so no id is leased twice, a crashed
 * server's unused batch included; a code maps to at most one link forever (deleted codes stay reserved, so a
 * code never points at a second URL); a generated code is accepted only for an id already leased.
 */
import { Packr } from 'msgpackr';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { ALIAS, GENERATED_CODE, ID_SPACE, idForCode } from './codes.js';

export const LEASE_SIZE = 1000;

export interface Link {
  long_url: string;
  /** Milliseconds since the epoch, on the creating application server's clock. */
  created_at: number;
  expires_at: number;
  created_by: string;
  alias: boolean;
  /** Entry time of the delete; null while the link is not deleted. */
  deleted_at: number | null;
}

export type LinkCommand =
  | { op: 'lease'; server: string }
  | { op: 'create'; code: string; long_url: string; created_at: number; expires_at: number; created_by: string; alias: boolean }
  /** `by` null: the cluster principal, which may delete any link. */
  | { op: 'delete'; code: string; by: string | null };

export type LinkResult =
  | { ok: true; op: 'lease'; start: number; end: number }
  /** `retried`: an identical create was applied before (a retry), and this is its link. */
  | { ok: true; op: 'create'; link: Link; retried: boolean }
  | { ok: true; op: 'delete'; link: Link }
  | { ok: false; error: 'exhausted' | 'taken' | 'not_leased' | 'not_found' | 'forbidden' };

/** A change applied on this member, told to its read cache. */
export type LinkChange = { kind: 'deleted'; code: string } | { kind: 'restored' };

interface Snapshot {
  nextId: number;
  /** [code, long_url, created_at, expires_at, created_by, alias, deleted_at] */
  links: Array<[string, string, number, number, string, boolean, number | null]>;
}

const packr = new Packr({ useRecords: false });

export class LinkMachine implements StateMachine<LinkCommand, LinkResult> {
  private nextId = 0;
  private links = new Map<string, Link>();
  /** Read-cache invalidation on this member (in-memory hints, never state). */
  onChange: ((change: LinkChange) => void) | null = null;

  apply(command: LinkCommand, ctx: ApplyContext): LinkResult {
    switch (command.op) {
      case 'lease': {
        if (this.nextId + LEASE_SIZE > ID_SPACE) return { ok: false, error: 'exhausted' };
        const start = this.nextId;
        this.nextId += LEASE_SIZE;
        return { ok: true, op: 'lease', start, end: this.nextId };
      }
      case 'create':
        return this.create(command);
      case 'delete': {
        const link = this.links.get(command.code);
        if (link === undefined) return { ok: false, error: 'not_found' };
        if (command.by !== null && command.by !== link.created_by) return { ok: false, error: 'forbidden' };
        // Deleting a deleted link again succeeds: a retried delete must not turn into a 404.
        if (link.deleted_at === null) {
          link.deleted_at = ctx.time;
          this.onChange?.({ kind: 'deleted', code: command.code });
        }
        return { ok: true, op: 'delete', link };
      }
    }
  }

  private create(command: Extract<LinkCommand, { op: 'create' }>): LinkResult {
    const existing = this.links.get(command.code);
    if (existing !== undefined) {
      const identical =
        existing.long_url === command.long_url &&
        existing.created_by === command.created_by &&
        existing.created_at === command.created_at &&
        existing.expires_at === command.expires_at &&
        existing.alias === command.alias &&
        existing.deleted_at === null;
      return identical ? { ok: true, op: 'create', link: existing, retried: true } : { ok: false, error: 'taken' };
    }
    // A generated code must come from an id some server leased: nobody can squat the generated space.
    if (command.alias ? !ALIAS.test(command.code) : !GENERATED_CODE.test(command.code) || idForCode(command.code) >= this.nextId) {
      return { ok: false, error: 'not_leased' };
    }
    const link: Link = {
      long_url: command.long_url,
      created_at: command.created_at,
      expires_at: command.expires_at,
      created_by: command.created_by,
      alias: command.alias,
      deleted_at: null,
    };
    this.links.set(command.code, link);
    return { ok: true, op: 'create', link, retried: false };
  }

  /** The link under `code`, deleted or not; null when there never was one. */
  get(code: string): Link | null {
    return this.links.get(code) ?? null;
  }

  /** The first id the next lease will hand out. */
  get leasedUpTo(): number {
    return this.nextId;
  }

  get size(): number {
    return this.links.size;
  }

  snapshot(): Uint8Array {
    const links: Snapshot['links'] = [];
    for (const [code, l] of this.links) links.push([code, l.long_url, l.created_at, l.expires_at, l.created_by, l.alias, l.deleted_at]);
    return packr.pack({ nextId: this.nextId, links } satisfies Snapshot);
  }

  restore(data: Uint8Array): void {
    const s = packr.unpack(data) as Snapshot;
    this.nextId = s.nextId;
    this.links = new Map(
      s.links.map(([code, long_url, created_at, expires_at, created_by, alias, deleted_at]) => [
        code,
        { long_url, created_at, expires_at, created_by, alias, deleted_at },
      ]),
    );
    this.onChange?.({ kind: 'restored' });
  }
}
