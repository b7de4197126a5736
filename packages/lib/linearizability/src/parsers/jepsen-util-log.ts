import type { GenericEvent, GenericType } from '../adapters/generic.js';
import { ParseError } from './parse-error.js';

const LINE = /^INFO\s+jepsen\.util\s+-\s+(\S+)\s+:(invoke|ok|fail|info)\s+:(\S+)(?:\s+(.*?))?\s*$/;

/**
 * Parses Jepsen's console log of operations, `INFO  jepsen.util - P  :type  :f  value` (tabs or spaces, as in
 * Porcupine's etcd logs), into {@link GenericEvent}s, for any model. The value is read as: `nil` → null, an
 * integer, `[a b ...]` → an array of those, `:kw` → "kw", anything else the text itself (so `:timed-out` after a
 * value ends up in the text). The process is an integer, or a name such as `:nemesis`. The line number is each
 * event's time. Blank lines are skipped; other lines that do not fit throw a {@link ParseError}.
 *
 * For Porcupine's etcd logs, check with the cas-register model and `casFailIsObservation` (a `:fail :cas` is
 * etcd answering that the compare failed), the same reading as {@link parseJepsenEtcdLog}.
 */
export function parseJepsenUtilLog(text: string): GenericEvent[] {
  const events: GenericEvent[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const match = LINE.exec(line);
    if (match === null) throw new ParseError(index + 1, line, 'not a jepsen.util operation line');
    const [, processText, type, f, valueText] = match as unknown as [
      string,
      string,
      GenericType,
      string,
      string | undefined,
    ];
    const process = /^\d+$/.test(processText) ? Number(processText) : processText.replace(/^:/, '');
    const event: { -readonly [K in keyof GenericEvent]: GenericEvent[K] } = {
      process,
      type,
      f,
      value: readValue((valueText ?? 'nil').trim()),
      time: index,
    };
    const reason = /(?:^|\s):([a-z][\w-]*)$/.exec(valueText ?? '');
    if (reason !== null && (type === 'fail' || type === 'info')) {
      event.error = reason[1]!;
      event.value = readValue((valueText ?? '').slice(0, reason.index).trim());
    }
    events.push(event);
  });
  return events;
}

function readValue(text: string): unknown {
  if (text === 'nil' || text === '') return null;
  if (/^-?\d+$/.test(text)) return Number(text);
  if (text.startsWith(':')) return text.slice(1);
  const vector = /^\[(.*)\]$/.exec(text);
  if (vector !== null)
    return vector[1]!.trim() === ''
      ? []
      : vector[1]!
          .trim()
          .split(/[\s,]+/)
          .map(readValue);
  return text;
}
