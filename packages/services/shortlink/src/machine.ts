/**
 * The link store's replicated state machine: the id allocator and the links. Pure and deterministic: the only
 * time it reads is the entry's leader-stamped time (when a delete happened; the latest a purge may cut off).
 *
 * Invariants (checked by tests): the allocator's counter only grows, so no id is leased twice, a crashed
 * server's unused batch included; a code maps to at most one link forever (deleted and purged codes stay
 * reserved, so a code never points at a second URL); a generated code is accepted only for an id already leased.
 *
 * Purge: links dead (expired or deleted) before a cutoff the leader proposes are dropped from memory. A purged
 * generated code needs nothing to stay reserved (ids are leased once and app servers issue each once); a purged
 * alias leaves its code in `retiredAliases`, because click analytics is keyed by code and must never mix the
 * clicks of two owners.
 */
import { Packr } from 'msgpackr';
import {
  arrayField,
  booleanField,
  CommandShapeError,
  commandOf,
  integerField,
  nullableStringField,
  stringArrayField,
  stringField,
} from '@raftkit/http';
import type { ApplyContext, StateMachine } from '@raftkit/raft';
import { ALIAS, GENERATED_CODE, ID_SPACE, idForCode } from './codes.js';
import { isHeaderSafeUrl, USER } from './input.js';

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

/** One link to create: the fields of the `create` command, also the items of `create_many`. */
export interface CreateSpec {
  code: string;
  long_url: string;
  created_at: number;
  expires_at: number;
  created_by: string;
  alias: boolean;
}

/** What became of one link of a `create_many`; `retried`: an identical create was applied before (a retry). */
export type CreateOutcome =
  | { status: 'created'; link: Link }
  | { status: 'retried'; link: Link }
  | { status: 'taken' }
  | { status: 'not_leased' };

export type LinkCommand =
  | { op: 'lease'; server: string }
  | ({ op: 'create' } & CreateSpec)
  /** Many creates in one entry (an app server's group commit), applied in order: earlier links win. */
  | { op: 'create_many'; links: CreateSpec[] }
  /** `by` null: the cluster principal, which may delete any link. */
  | { op: 'delete'; code: string; by: string | null }
  /** Drop these links if they died (expired or were deleted) at or before `before` and before the entry's time. */
  | { op: 'purge'; before: number; codes: string[] };

export type LinkResult =
  | { ok: true; op: 'lease'; start: number; end: number }
  /** `retried`: an identical create was applied before (a retry), and this is its link. */
  | { ok: true; op: 'create'; link: Link; retried: boolean }
  | { ok: true; op: 'create_many'; results: CreateOutcome[] }
  | { ok: true; op: 'delete'; link: Link }
  | { ok: true; op: 'purge'; purged: number }
  | { ok: false; error: 'exhausted' | 'taken' | 'not_leased' | 'not_found' | 'forbidden' };

/** A change applied on this member, told to its read cache. */
export type LinkChange = { kind: 'deleted'; code: string } | { kind: 'restored' };

interface Snapshot {
  nextId: number;
  /** [code, long_url, created_at, expires_at, created_by, alias, deleted_at] */
  links: Array<[string, string, number, number, string, boolean, number | null]>;
  /** Purged aliases (absent in snapshots written before purge existed). */
  retired?: string[];
}

/** When a link stopped resolving: its deletion, or its expiry if that came first. */
export function diedAt(link: Link): number {
  return link.deleted_at === null ? link.expires_at : Math.min(link.deleted_at, link.expires_at);
}

const packr = new Packr({ useRecords: false });

/** Most links in one create_many entry (an app server's group commit sends up to 1,000). */
const MAX_LINKS_PER_ENTRY = 10_000;

function checkCreateSpec(spec: Record<string, unknown>, at: string): void {
  // A code of the wrong form for its kind is the machine's own `not_leased` answer, not a shape error.
  stringField(spec, 'code', 64);
  booleanField(spec, 'alias');
  // What a redirect sends back as its Location header: a stored value that cannot be one must never get in.
  if (!isHeaderSafeUrl(spec.long_url) || !/^https?:\/\//.test(spec.long_url))
    throw new CommandShapeError(`${at}.long_url: not an http(s) URL that can be a Location header`);
  const createdAt = integerField(spec, 'created_at');
  if (integerField(spec, 'expires_at') <= createdAt)
    throw new CommandShapeError(`${at}.expires_at: not after created_at`);
  if (!USER.test(stringField(spec, 'created_by', 64))) throw new CommandShapeError(`${at}.created_by: not a user name`);
}

/**
 * Throws CommandShapeError unless `command` is a LinkCommand: checked before anything changes, so a malformed entry
 * (a bug or a forged one: a long_url with CR/LF once crashed an app server on redirect) is refused the same way on
 * every member (ApplyError for its proposer) and changes nothing. A create_many with one bad link is refused whole.
 */
function checkLinkCommand(command: unknown): asserts command is LinkCommand {
  const c = commandOf(command, ['lease', 'create', 'create_many', 'delete', 'purge'] as const);
  switch (c.op) {
    case 'lease':
      stringField(c, 'server', 256);
      return;
    case 'create':
      checkCreateSpec(c, 'create');
      return;
    case 'create_many':
      arrayField(
        c,
        'links',
        (spec, at) => {
          if (typeof spec !== 'object' || spec === null || Array.isArray(spec))
            throw new CommandShapeError(`create_many.${at}: not an object`);
          checkCreateSpec(spec as Record<string, unknown>, `create_many.${at}`);
        },
        MAX_LINKS_PER_ENTRY,
      );
      return;
    case 'delete':
      stringField(c, 'code', 64);
      nullableStringField(c, 'by', 64, 1);
      return;
    case 'purge':
      integerField(c, 'before');
      stringArrayField(c, 'codes', 1_000_000, 64);
      return;
  }
}

export class LinkMachine implements StateMachine<LinkCommand, LinkResult> {
  private nextId = 0;
  private links = new Map<string, Link>();
  private retiredAliases = new Set<string>();
  /** Read-cache invalidation on this member (in-memory hints, never state). */
  onChange: ((change: LinkChange) => void) | null = null;

  apply(command: LinkCommand, ctx: ApplyContext): LinkResult {
    checkLinkCommand(command);
    switch (command.op) {
      case 'lease': {
        if (this.nextId + LEASE_SIZE > ID_SPACE) return { ok: false, error: 'exhausted' };
        const start = this.nextId;
        this.nextId += LEASE_SIZE;
        return { ok: true, op: 'lease', start, end: this.nextId };
      }
      case 'create': {
        const outcome = this.create(command);
        if (outcome.status === 'created' || outcome.status === 'retried')
          return { ok: true, op: 'create', link: outcome.link, retried: outcome.status === 'retried' };
        return { ok: false, error: outcome.status };
      }
      case 'create_many': {
        // A code claimed earlier in this entry wins over any later claim in it, even an identical one: a retry is
        // never inside the batch it retries, and re-sending the whole batch gives every link the same answer.
        const claimed = new Set<string>();
        const results = command.links.map((spec): CreateOutcome => {
          if (claimed.has(spec.code)) return { status: 'taken' };
          const outcome = this.create(spec);
          if (outcome.status === 'created' || outcome.status === 'retried') claimed.add(spec.code);
          return outcome;
        });
        return { ok: true, op: 'create_many', results };
      }
      case 'purge': {
        // No cache is told: a dead link is in none (a delete evicts it, cache entries end before expiry).
        const cutoff = Math.min(command.before, ctx.time);
        let purged = 0;
        for (const code of command.codes) {
          const link = this.links.get(code);
          if (link === undefined || diedAt(link) > cutoff) continue;
          this.links.delete(code);
          if (link.alias) this.retiredAliases.add(code);
          purged++;
        }
        return { ok: true, op: 'purge', purged };
      }
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

  private create(command: CreateSpec): CreateOutcome {
    if (this.retiredAliases.has(command.code)) return { status: 'taken' };
    const existing = this.links.get(command.code);
    if (existing !== undefined) {
      const identical =
        existing.long_url === command.long_url &&
        existing.created_by === command.created_by &&
        existing.created_at === command.created_at &&
        existing.expires_at === command.expires_at &&
        existing.alias === command.alias &&
        existing.deleted_at === null;
      return identical ? { status: 'retried', link: existing } : { status: 'taken' };
    }
    // A generated code must come from an id some server leased: nobody can squat the generated space.
    if (
      command.alias
        ? !ALIAS.test(command.code)
        : !GENERATED_CODE.test(command.code) || idForCode(command.code) >= this.nextId
    ) {
      return { status: 'not_leased' };
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
    return { status: 'created', link };
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

  /** Purged aliases, kept so they are never claimed again. */
  get retiredCount(): number {
    return this.retiredAliases.size;
  }

  /**
   * Every link, in insertion order, for the leader's purge scan. The scan may run across applies: a Map iterator
   * skips entries deleted meanwhile and visits ones added, and a stale candidate is re-checked in apply anyway.
   */
  entries(): IterableIterator<[string, Link]> {
    return this.links.entries();
  }

  snapshot(): Uint8Array {
    const links: Snapshot['links'] = [];
    for (const [code, l] of this.links)
      links.push([code, l.long_url, l.created_at, l.expires_at, l.created_by, l.alias, l.deleted_at]);
    return packr.pack({ nextId: this.nextId, links, retired: [...this.retiredAliases] } satisfies Snapshot);
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
    this.retiredAliases = new Set(s.retired ?? []);
    this.onChange?.({ kind: 'restored' });
  }
}
