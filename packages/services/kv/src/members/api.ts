/** HTTP endpoints of the key-value service. See README.md for the contract. */
import { isUtf8 } from 'node:buffer';
import {
  badRequest,
  conflict,
  notFound,
  BUSY_WRITERS,
  requireObject,
  requireWellFormed,
  Reply,
  type RequestContext,
  type ServiceContext,
  type ServiceDefinition,
} from '@raftkit/http';
import { KvBatcher } from './batch.js';
import { KvMachine, type KvCommand, type KvKeyCommand, type KvKeyResult, type KvResult } from '../machine.js';

export const MAX_KEY_BYTES = 1024;
export const MAX_VALUE_BYTES = 1024 * 1024;

function keyOf(ctx: RequestContext): string {
  const key = ctx.params.key ?? '';
  const bytes = Buffer.byteLength(key);
  if (bytes === 0 || bytes > MAX_KEY_BYTES) {
    throw badRequest('invalid_key', `the key must be 1 to ${MAX_KEY_BYTES} bytes`, { field: 'key' });
  }
  // HTTP clients collapse these path segments, so such a key could be written but never read back reliably.
  if (key === '.' || key === '..')
    throw badRequest('invalid_key', 'the keys "." and ".." cannot be addressed in a URL path', { field: 'key' });
  return key;
}

// biome-ignore lint/suspicious/noShadowRestrictedNames: a module function, never called as a method of an object
function valueOf(v: unknown, field: string): string | null {
  if (v === null) return null;
  if (typeof v !== 'string') throw badRequest('invalid_field', `${field} must be a string or null`, { field });
  if (Buffer.byteLength(v) > MAX_VALUE_BYTES)
    throw badRequest('invalid_field', `${field} is over ${MAX_VALUE_BYTES} bytes`, { field });
  // PUT refuses bytes that are not UTF-8; JSON can still carry a lone surrogate, which would be stored as U+FFFD.
  return requireWellFormed(v, field);
}

/** The body as UTF-8 text, and its size in bytes. */
async function bodyText(ctx: RequestContext): Promise<{ text: string; bytes: number }> {
  const bytes = await ctx.bytes();
  // Checked on the bytes: decoding would turn a bad sequence into U+FFFD, so only bytes that are UTF-8 pass.
  if (!isUtf8(bytes)) throw badRequest('invalid_value', 'the value must be UTF-8 text', { field: 'body' });
  return { text: bytes.toString('utf8'), bytes: bytes.length };
}

export function kvRoutes(service: ServiceContext<KvCommand, KvResult>): void {
  /** The service's one group (its kind provisioned as 'one group'). */
  const group = service.group();
  const machine = (): KvMachine => group.machine as KvMachine;
  const batcher = new KvBatcher();
  const propose = (command: KvCommand): Promise<KvResult> => group.node.propose(command);
  service.metrics
    .gauge('kv_batched_entries', 'Raft entries proposed by the write batcher on this member')
    .set(() => batcher.entries);
  service.metrics.gauge('kv_batched_commands', 'Writes those entries carried').set(() => batcher.commands);
  /** A write through the turn's batch (an idempotent one goes alone: ServiceGroup.write). `bytes` bounds its size. */
  const write = async (ctx: RequestContext, command: KvKeyCommand, bytes: number): Promise<KvKeyResult> =>
    (await group.write(command, ctx, () => batcher.submit(propose, command, bytes))) as KvKeyResult;
  service.router
    .put('/v1/kv/:key', { admits: 'authenticated' }, async (ctx) => {
      const key = keyOf(ctx);
      const { text: value, bytes } = await bodyText(ctx);
      const result = await write(ctx, { op: 'put', key, value }, key.length * 3 + bytes);
      return { key, revision: result.revision };
    })
    .get('/v1/kv/:key', { admits: 'authenticated' }, async (ctx) => {
      const key = keyOf(ctx);
      await group.readBarrier(ctx);
      const entry = machine().get(key);
      if (entry === undefined) throw notFound(`no key ${JSON.stringify(key)}`, { key });
      return { key, value: entry.value, revision: entry.revision };
    })
    .delete('/v1/kv/:key', { admits: 'authenticated' }, async (ctx) => {
      const key = keyOf(ctx);
      const result = await write(ctx, { op: 'delete', key }, key.length * 3);
      if (result.op !== 'delete' || !result.deleted) throw notFound(`no key ${JSON.stringify(key)}`, { key });
      return { key, deleted: true, revision: result.revision };
    })
    .post('/v1/kv/:key/cas', { admits: 'authenticated' }, async (ctx) => {
      const key = keyOf(ctx);
      const body = requireObject(await ctx.json());
      if (!('from' in body))
        throw badRequest('invalid_field', 'from is required (null means the key must be absent)', { field: 'from' });
      if (!('to' in body)) throw badRequest('invalid_field', 'to is required (null deletes the key)', { field: 'to' });
      const from = valueOf(body.from, 'from');
      const to = valueOf(body.to, 'to');
      const result = await write(
        ctx,
        { op: 'cas', key, from, to },
        (key.length + (from?.length ?? 0) + (to?.length ?? 0)) * 3,
      );
      if (result.op === 'cas' && !result.ok) {
        throw conflict('cas_mismatch', 'the current value is not "from"', {
          key,
          current: result.current,
          revision: result.revision,
        });
      }
      return new Reply(200, { key, value: to, revision: result.revision });
    });
}

export const kvService: ServiceDefinition<KvCommand, KvResult> = {
  name: 'kv',
  // Paced writes, forwarded results, one GC thread (README.md "Write pacing", "Forwarded results", "Garbage collection on one thread").
  kinds: [
    {
      name: 'kv',
      provisioning: 'one group',
      createMachine: () => new KvMachine(),
      raft: BUSY_WRITERS.raft,
      replicas: 'every member',
    },
  ],
  routes: kvRoutes,
  memberNodeFlags: BUSY_WRITERS.memberNodeFlags,
};
