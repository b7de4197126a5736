import type { HistoryEvent } from '../history.js';
import type { KvInput, KvOutput } from '../models/kv.js';
import { forEachEdnLine, isKeyword, type EdnValue } from './edn.js';

/**
 * Parses Porcupine's key-value test logs (`test_data/kv/*.txt`): one EDN map
 * per line,
 *
 *     {:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}
 *     {:process 0, :type :ok, :f :get, :key "3", :value "x 0 1 y"}
 *
 * with `:f` one of get / put / append and `:type` one of invoke / ok / fail /
 * info. An invoke carries the argument (nil for get); an ok carries the
 * result, which only matters for get (a missing key reads as ""). The line
 * number is each event's time. Blank lines are skipped; anything else that
 * does not fit throws a {@link ParseError}.
 */
export function parsePorcupineKvLog(text: string): HistoryEvent<KvInput, KvOutput>[] {
  const events: HistoryEvent<KvInput, KvOutput>[] = [];
  forEachEdnLine(text, (fields, fail, index) => {
    const process = fields.get('process');
    if (typeof process !== 'number') return fail(':process must be an integer');
    const type = keywordName(fields.get('type')) ?? fail(':type must be a keyword');
    const f = keywordName(fields.get('f'));
    if (f !== 'get' && f !== 'put' && f !== 'append') return fail(':f must be :get, :put or :append');
    const key = fields.get('key');
    if (typeof key !== 'string') return fail(':key must be a string');
    const value = fields.get('value');
    if (value !== null && typeof value !== 'string') return fail(':value must be a string or nil');
    const time = index;
    switch (type) {
      case 'invoke':
        events.push({
          type: 'invoke',
          clientId: process,
          time,
          input: value === null ? { op: f, key } : { op: f, key, value },
        });
        return;
      case 'ok':
        events.push({ type: 'ok', clientId: process, time, output: f === 'get' && value !== null ? { value } : {} });
        return;
      case 'fail':
      case 'info':
        events.push({ type, clientId: process, time });
        return;
      default:
        return fail(`unknown :type :${type}`);
    }
  });
  return events;
}

function keywordName(value: EdnValue | undefined): string | undefined {
  return isKeyword(value) ? value.keyword : undefined;
}
