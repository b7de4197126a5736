import type { GenericEvent, GenericType } from '../adapters/generic.js';
import { forEachEdnLine, isKeyword, type EdnValue } from './edn.js';

/**
 * Parses a Jepsen history with one EDN map per line, as Jepsen writes
 * `history.edn` and as Porcupine's kv logs are:
 *
 *     {:type :invoke, :f :cas, :value [1 2], :process 3, :time 1234, :index 7}
 *     {:process :nemesis, :type :info, :f :start, :value nil}
 *
 * into {@link GenericEvent}s. Keywords become their names as strings
 * (`:nemesis` → "nemesis"), vectors become arrays. `:time` is kept when
 * present (Jepsen's nanoseconds). `:key` and `:error` are kept. Blank lines
 * are skipped; anything else that does not fit throws a {@link ParseError}.
 */
export function parseJepsenEdnHistory(text: string): GenericEvent[] {
  const events: GenericEvent[] = [];
  forEachEdnLine(text, (fields, fail) => {
    const process = plain(fields.get('process'));
    if (typeof process !== 'number' && typeof process !== 'string')
      return fail(':process must be an integer or a keyword');
    const type = plain(fields.get('type'));
    if (type !== 'invoke' && type !== 'ok' && type !== 'fail' && type !== 'info')
      return fail(':type must be :invoke, :ok, :fail or :info');
    const f = plain(fields.get('f'));
    if (typeof f !== 'string') return fail(':f must be a keyword or string');
    const event: { -readonly [K in keyof GenericEvent]: GenericEvent[K] } = {
      process,
      type: type as GenericType,
      f,
      value: plain(fields.get('value') ?? null),
    };
    const key = fields.get('key');
    if (key !== undefined) event.key = typeof key === 'string' ? key : JSON.stringify(plain(key));
    if (fields.has('error')) event.error = plain(fields.get('error')!);
    const time = fields.get('time');
    if (typeof time === 'number') event.time = time;
    events.push(event);
  });
  return events;
}

function plain(value: EdnValue | undefined): unknown {
  if (value === undefined) return undefined;
  if (isKeyword(value)) return value.keyword;
  if (Array.isArray(value)) return value.map((item) => plain(item));
  return value;
}
