import type { HistoryEvent } from '../history.js';
import type { CasRegisterInput, CasRegisterOutput } from '../models/cas-register.js';
import { ParseError } from './parse-error.js';

/** The etcd register holds integers; nil (key absent) is `null`. */
export type EtcdValue = number | null;
export type EtcdInput = CasRegisterInput<EtcdValue>;
export type EtcdOutput = CasRegisterOutput<EtcdValue>;

const LINE = /^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.+?)\s*$/;
const CAS_ARGUMENT = /^\[(\d+)\s+(\d+)\]$/;
const INTEGER = /^\d+$/;

/**
 * Parses the Jepsen etcd logs (Porcupine's `test_data/jepsen/etcd_NNN.log`),
 * one event per line, fields separated by tabs or spaces:
 *
 *     INFO  jepsen.util - 3	:invoke	:cas	[1 4]
 *     INFO  jepsen.util - 3	:fail	:cas	[1 4]
 *
 * The events are for {@link casRegisterModel} with initial value `null`.
 * Interpretation, the same as Porcupine's tests:
 * - `:ok :read V` reads V (`nil` → null); `:ok :write` / `:ok :cas` succeed.
 * - `:fail :cas [a b]` is *not* a Jepsen "did not happen": etcd answered
 *   that the compare failed, so it becomes an ok event with `{ ok: false }`,
 *   a definite observation that the value was not `a`.
 * - `:fail :read :timed-out` means the read's result is unknown; a read that
 *   does not change state either way, so it is emitted as `fail` (dropped).
 * - `:info :write|:cas :timed-out` means the outcome is unknown: `info`.
 *
 * The line number is each event's time. Blank lines are skipped; any other
 * line that does not fit throws a {@link ParseError}.
 */
export function parseJepsenEtcdLog(text: string): HistoryEvent<EtcdInput, EtcdOutput>[] {
  const events: HistoryEvent<EtcdInput, EtcdOutput>[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    const fail = (reason: string): never => {
      throw new ParseError(index + 1, line, reason);
    };
    const match = LINE.exec(line) ?? fail('not a jepsen.util operation line');
    const [, processText, type, f, argument] = match as unknown as [string, string, string, string, string];
    const clientId = Number(processText);
    const time = index;
    if (type === 'invoke') {
      events.push({ type, clientId, time, input: parseInvocation(f, argument) ?? fail(`bad :${f} argument`) });
    } else if (type === 'info') {
      events.push({ type, clientId, time });
    } else if (type === 'fail' && f === 'read') {
      events.push({ type: 'fail', clientId, time });
    } else if (type === 'fail' && f === 'cas') {
      if (!CAS_ARGUMENT.test(argument)) fail('bad :cas argument');
      events.push({ type: 'ok', clientId, time, output: { ok: false } });
    } else if (type === 'fail') {
      fail(`unexpected :fail :${f}`);
    } else {
      events.push({ type: 'ok', clientId, time, output: parseCompletion(f, argument) ?? fail(`bad :${f} result`) });
    }
  });
  return events;
}

function parseInvocation(f: string, argument: string): EtcdInput | undefined {
  if (f === 'read') return argument === 'nil' ? { op: 'read' } : undefined;
  if (f === 'write') return INTEGER.test(argument) ? { op: 'write', value: Number(argument) } : undefined;
  const cas = CAS_ARGUMENT.exec(argument);
  return cas ? { op: 'cas', from: Number(cas[1]), to: Number(cas[2]) } : undefined;
}

function parseCompletion(f: string, argument: string): EtcdOutput | undefined {
  if (f === 'read') {
    if (argument === 'nil') return { value: null };
    return INTEGER.test(argument) ? { value: Number(argument) } : undefined;
  }
  if (f === 'write') return INTEGER.test(argument) ? {} : undefined;
  return CAS_ARGUMENT.test(argument) ? { ok: true } : undefined;
}
