/**
 * The shape check of a CollabCommand, done by the member before proposing (a bad command is a 400, never an entry)
 * and again by the machine (an entry that is not a command is refused, never a crash). Ops themselves are checked
 * by the machine, change by change, so one bad change fails alone with invalid_op.
 */
import {
  arrayField,
  CommandShapeError,
  commandOf,
  integerField,
  nullableStringField,
  stringField,
} from '@raftkit/http';
import type { Id } from '@raftkit/crdt';
import {
  DOC_ID,
  MAX_CHANGES_PER_APPEND,
  MAX_COMMENT_CHARS,
  MAX_CHARS,
  MAX_TITLE_CHARS,
  ROLES,
  USER_ID,
  type CollabCommand,
  type Role,
} from './vocabulary.js';

const OPS = [
  'create',
  'delete',
  'acquire',
  'renew',
  'release',
  'append',
  'snapshot',
  'restore',
  'permission',
  'comment',
  'uncomment',
  'compact',
] as const;

function docId(c: Record<string, unknown>): string {
  const id = stringField(c, 'doc_id', 64);
  if (!DOC_ID.test(id)) throw new CommandShapeError('doc_id: 1..64 of A-Z a-z 0-9 _ -');
  return id;
}

function user(c: Record<string, unknown>, key: string): string {
  const u = stringField(c, key, 64);
  if (!USER_ID.test(u)) throw new CommandShapeError(`${key}: a user id is 1..64 of A-Z a-z 0-9 . _ -`);
  return u;
}

function id(value: unknown, at: string): Id {
  if (
    !Array.isArray(value) ||
    value.length !== 2 ||
    typeof value[0] !== 'string' ||
    value[0].length === 0 ||
    value[0].length > 200 ||
    !Number.isSafeInteger(value[1]) ||
    (value[1] as number) < 0
  ) {
    throw new CommandShapeError(`${at}: an id is [client, counter]`);
  }
  return [value[0], value[1] as number];
}

export function checkCommand(command: unknown): asserts command is CollabCommand {
  const c = commandOf(command, OPS);
  switch (c.op) {
    case 'create':
      docId(c);
      stringField(c, 'title', MAX_TITLE_CHARS, 0);
      user(c, 'owner');
      nullableStringField(c, 'template', MAX_CHARS);
      if (c.max_docs !== undefined) integerField(c, 'max_docs', 0);
      return;
    case 'delete':
      docId(c);
      return;
    case 'acquire':
      docId(c);
      stringField(c, 'worker', 64);
      stringField(c, 'url', 300);
      return;
    case 'renew':
      stringField(c, 'worker', 64);
      arrayField(
        c,
        'docs',
        (v, at) => {
          if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || !Number.isSafeInteger(v[1]))
            throw new CommandShapeError(`${at}: [doc_id, generation]`);
          return v;
        },
        100_000,
      );
      return;
    case 'release':
      docId(c);
      stringField(c, 'worker', 64);
      integerField(c, 'generation');
      return;
    case 'append':
      docId(c);
      integerField(c, 'generation');
      if (
        arrayField(
          c,
          'changes',
          (v, at) => {
            if (typeof v !== 'object' || v === null || Array.isArray(v))
              throw new CommandShapeError(`${at}: a change is an object`);
            const ch = v as Record<string, unknown>;
            stringField(ch, 'op_id', 300);
            user(ch, 'author');
            integerField(ch, 'parent_revision');
            if (!Array.isArray(ch.ops)) throw new CommandShapeError(`${at}.ops: a list`);
            return v;
          },
          MAX_CHANGES_PER_APPEND,
        ).length === 0
      )
        throw new CommandShapeError('changes: none');
      if ((c.session === undefined) !== (c.seq === undefined))
        throw new CommandShapeError('session and seq go together');
      if (c.session !== undefined) {
        stringField(c, 'session', 64);
        integerField(c, 'seq', 1);
      }
      return;
    case 'snapshot':
      docId(c);
      stringField(c, 'name', 200, 0);
      return;
    case 'restore':
      docId(c);
      stringField(c, 'snapshot_id', 64);
      user(c, 'author');
      return;
    case 'permission':
      docId(c);
      user(c, 'user');
      if (c.role !== null && !ROLES.includes(c.role as Role))
        throw new CommandShapeError('role: viewer, commenter, editor or null');
      return;
    case 'comment':
      docId(c);
      user(c, 'author');
      id(c.start, 'start');
      id(c.end, 'end');
      stringField(c, 'body', MAX_COMMENT_CHARS);
      return;
    case 'uncomment':
      docId(c);
      stringField(c, 'comment_id', 64);
      user(c, 'by');
      return;
    case 'compact':
      return;
  }
}
