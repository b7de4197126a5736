/**
 * The shared body readers: parseJsonBody (every handler and fast path that reads a JSON body's text) and errorBody
 * (every caller that reads an upstream's error body).
 */
import t from 'tap';
import { errorBody, HttpError, parseJsonBody } from '../src/index.js';

t.test('parseJsonBody: JSON in, a 400 invalid_json naming the complaint otherwise', async (t) => {
  t.same(parseJsonBody('{"a":[1,2]}'), { a: [1, 2] });
  t.equal(parseJsonBody('null'), null);
  let thrown: unknown;
  try {
    parseJsonBody('{"a":');
  } catch (e) {
    thrown = e;
  }
  t.ok(thrown instanceof HttpError, 'an HttpError');
  const e = thrown as HttpError;
  t.equal(e.status, 400);
  t.equal(e.code, 'invalid_json');
  t.match(e.message, /^the body is not valid JSON: ./, "the router's message, with the parser's complaint");
  t.same(Object.keys(e.body().error), ['code', 'message'], 'no other field in the body');
});

t.test('errorBody: the error object of an error body, else undefined', async (t) => {
  t.same(errorBody({ error: { code: 'x', message: 'm', field: 'f' } }), { code: 'x', message: 'm', field: 'f' });
  t.equal(errorBody({ error: 'text' }), undefined);
  t.equal(errorBody(null), undefined);
  t.equal(errorBody('plain'), undefined);
  t.equal(errorBody({ ok: true }), undefined);
});
