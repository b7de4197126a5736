import type { IncomingMessage } from 'node:http';
import t from 'tap';
import {
  authenticate,
  deriveClientToken,
  deriveServiceToken,
  HttpError,
  isInternalCaller,
  verifyToken,
} from '../src/index.js';

const clusterA = ['token-a'];
const clusterB = ['token-b'];

function status(f: () => unknown): number | 'ok' {
  try {
    f();
    return 'ok';
  } catch (e) {
    return e instanceof HttpError ? e.status : -1;
  }
}

t.test('the cluster token and derived client tokens prove who calls', async (t) => {
  t.match(verifyToken('token-a', clusterA), { kind: 'cluster', name: 'cluster' });
  const alice = deriveClientToken('token-a', 'alice');
  t.match(verifyToken(alice, clusterA), { kind: 'client', name: 'alice' });
  t.match(verifyToken(alice, clusterA), { kind: 'client', name: 'alice' }, 'again, from the cache of proven tokens');
});

t.test('a token proven for one cluster is not accepted by another', async (t) => {
  const alice = deriveClientToken('token-a', 'alice');
  t.equal(
    status(() => verifyToken(alice, clusterA)),
    'ok',
  );
  t.equal(
    status(() => verifyToken(alice, clusterB)),
    401,
  );
  t.equal(
    status(() => verifyToken('token-a', clusterB)),
    401,
  );
});

t.test('wrong and forged tokens are refused, every time', async (t) => {
  const forged = deriveClientToken('token-a', 'alice').replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
  for (let i = 0; i < 2; i++) {
    t.equal(
      status(() => verifyToken(forged, clusterA)),
      401,
      `forged MAC, try ${i + 1}`,
    );
    t.equal(
      status(() => verifyToken('token-a ', clusterA)),
      401,
      `near miss, try ${i + 1}`,
    );
    t.equal(
      status(() => verifyToken('client.mallory.xyz', clusterA)),
      401,
      `made-up client token, try ${i + 1}`,
    );
  }
});

t.test('authenticate: a proven Authorization header is remembered per cluster; a refused one never is', async (t) => {
  const req = (authorization?: string): IncomingMessage =>
    ({ headers: authorization === undefined ? {} : { authorization } }) as IncomingMessage;
  const alice = `Bearer ${deriveClientToken('token-a', 'alice')}`;
  const forged = alice.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
  for (let i = 0; i < 2; i++) {
    t.equal(
      status(() => authenticate(req(forged), clusterA)),
      401,
      `forged, try ${i + 1}`,
    );
    t.match(authenticate(req(alice), clusterA), { kind: 'client', name: 'alice' }, `proven, try ${i + 1}`);
    t.equal(
      status(() => authenticate(req(alice), clusterB)),
      401,
      `the same header for another cluster, try ${i + 1}`,
    );
    t.equal(
      status(() => authenticate(req(), clusterA)),
      401,
      `no header, try ${i + 1}`,
    );
    t.equal(
      status(() => authenticate(req('Basic dG9rZW4tYQ=='), clusterA)),
      401,
      `not a bearer token, try ${i + 1}`,
    );
    t.match(
      authenticate(req('bearer   token-a  '), clusterA),
      { kind: 'cluster' },
      `scheme in any case, spaces around the token, try ${i + 1}`,
    );
  }
});

t.test(
  'service tokens: a kind of their own, never minted by deriving a client token, internal to their service only',
  async (t) => {
    const notify = deriveServiceToken('token-a', 'notify');
    const p = verifyToken(notify, clusterA);
    t.match(p, { kind: 'service', name: 'service.notify' });
    t.equal(
      status(() => verifyToken(notify, clusterB)),
      401,
      'another cluster: 401',
    );
    const named = verifyToken(deriveClientToken('token-a', 'service.notify'), clusterA);
    t.match(named, { kind: 'client', name: 'service.notify' }, 'a client named service.notify is a client');
    t.ok(isInternalCaller(p, 'notify'), "notify's workers are internal to notify");
    t.notOk(isInternalCaller(p, 'feed'), 'not to feed');
    t.notOk(isInternalCaller(named, 'notify'), 'a client token is internal to nothing, whatever its name');
    t.notOk(
      isInternalCaller(verifyToken(deriveClientToken('token-a', 'billing'), clusterA), 'notify'),
      'nor any other non-user client',
    );
    t.ok(isInternalCaller(verifyToken('token-a', clusterA), 'notify'), 'the cluster token is internal everywhere');
    t.notOk(isInternalCaller(null, 'notify'));
    t.equal(
      status(() => verifyToken(notify.replace('service.notify.', 'service.feed.'), clusterA)),
      401,
      "notify's MAC does not make a feed token",
    );
    t.equal(
      status(() => deriveServiceToken('token-a', 'Not A Service')),
      400,
    );
  },
);
