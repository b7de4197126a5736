import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import {
  countOps,
  HistoryFormatError,
  HistoryWriter,
  parseAnyHistory,
  parseHistoryJsonl,
  serializeEvent,
  type HistoryEvent,
} from '../src/index.js';

t.test('writer and reader round trip', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'jl-history-'));
  const path = join(dir, 'history.jsonl');
  const w = new HistoryWriter(path);
  w.append({ process: 0, type: 'invoke', f: 'write', key: 'k1', value: 3, node: 'n1' });
  w.append({ process: 0, type: 'ok', f: 'write', key: 'k1', value: 3, node: 'n1' });
  w.append({ process: 'nemesis', type: 'info', f: 'start-partition', value: { id: 1, links: ['n1>n2'] } });
  w.append({ process: 1, type: 'invoke', f: 'cas', key: 'k1', value: [3, 4] });
  w.append({ process: 1, type: 'fail', f: 'cas', key: 'k1', value: [3, 4], error: 'cas_mismatch' });
  w.append({ process: 2, type: 'invoke', f: 'read', key: 'k1', value: null });
  w.append({ process: 2, type: 'info', f: 'read', key: 'k1', error: 'timeout' });
  w.close();
  const text = readFileSync(path, 'utf8');
  t.equal(text.trim().split('\n').length, 7, 'one line per event');
  const back = parseHistoryJsonl(text);
  t.same(back, w.events, 'read back identical');
  t.ok(
    back.every((e, i) => i === 0 || e.time >= back[i - 1]!.time),
    'monotonic nanosecond times',
  );
  t.same(parseAnyHistory(text).format, 'jsonl');
  t.match(
    readFileSync(path, 'utf8').split('\n')[0]!,
    /^\{"process":0,"type":"invoke","f":"write","key":"k1","value":3,"time":\d+,"node":"n1"\}$/,
    'documented key order',
  );
});

t.test('serializeEvent omits absent fields', async (t) => {
  const e: HistoryEvent = { process: 3, type: 'invoke', f: 'read', time: 5 };
  t.equal(serializeEvent(e), '{"process":3,"type":"invoke","f":"read","time":5}');
});

t.test('malformed lines are refused with their line number', async (t) => {
  t.throws(() => parseHistoryJsonl('{"process":0,"type":"invoke","f":"read","time":1}\nnot json'), /line 2/);
  t.throws(() => parseHistoryJsonl('{"process":"x","type":"invoke","f":"read","time":1}'), HistoryFormatError);
  t.throws(() => parseHistoryJsonl('{"process":0,"type":"done","f":"read","time":1}'), /type must be/);
  t.throws(() => parseHistoryJsonl('{"process":0,"type":"ok","f":"read"}'), /time must be/);
});

t.test('formats are recognised', async (t) => {
  t.equal(parseAnyHistory('{:process 0, :type :invoke, :f :read, :value nil}\n').format, 'jepsen-edn');
  t.equal(parseAnyHistory('INFO  jepsen.util - 0\t:invoke\t:read\tnil\n').format, 'jepsen-log');
  t.throws(() => parseAnyHistory('hello'), /unrecognised/);
});

t.test('operation counts', async (t) => {
  const events: HistoryEvent[] = [
    { process: 0, type: 'invoke', f: 'read', time: 1 },
    { process: 0, type: 'ok', f: 'read', value: 1, time: 2 },
    { process: 1, type: 'invoke', f: 'write', value: 1, time: 3 },
    { process: 'nemesis', type: 'info', f: 'start-kill', time: 4 },
    { process: 1, type: 'info', f: 'write', time: 5 },
    { process: 2, type: 'invoke', f: 'write', value: 2, time: 6 },
  ];
  t.same(countOps(events), {
    total: 3,
    ok: 1,
    fail: 0,
    info: 1,
    open: 1,
    byF: { read: { ok: 1, fail: 0, info: 0 }, write: { ok: 0, fail: 0, info: 1 } },
  });
});
