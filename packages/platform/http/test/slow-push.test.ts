/** pushOrDrop (src/slow-push.ts): sends under the bound, drops the socket past it (the real-socket case: packages/services/auction/test/slow-push.test.ts). */
import t from 'tap';
import { pushOrDrop } from '../src/slow-push.js';

t.test('a socket under the bound gets the message', (t) => {
  const got: string[] = [];
  let terminated = false;
  const socket = { bufferedAmount: 10, send: (s: string) => got.push(s), terminate: () => (terminated = true) };
  t.ok(pushOrDrop(socket, 'hello', 10), 'sent at the bound');
  t.same(got, ['hello']);
  t.notOk(terminated);
  t.end();
});

t.test('a socket past the bound is dropped and gets nothing more', (t) => {
  const got: string[] = [];
  let terminated = false;
  const socket = { bufferedAmount: 11, send: (s: string) => got.push(s), terminate: () => (terminated = true) };
  t.notOk(pushOrDrop(socket, 'hello', 10), 'not sent');
  t.same(got, []);
  t.ok(terminated, 'terminated');
  t.end();
});
