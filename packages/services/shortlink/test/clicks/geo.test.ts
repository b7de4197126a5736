import { createServer, type IncomingMessage } from 'node:http';
import t from 'tap';
import { request } from 'undici';
import { countryOf } from '../../src/workers/clicks/index.js';
import { clientIp, isLocal } from '../../src/workers/clicks/geo.js';

/** Runs countryOf inside a real HTTP server on a request sent with `headers`. */
async function countryFor(
  settings: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<string | null> {
  let seen: string | null | undefined;
  const server = createServer((req, res) => {
    seen = countryOf(req, settings);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const res = await request(`http://127.0.0.1:${(server.address() as { port: number }).port}/`, { headers });
    await res.body.text();
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  return seen!;
}

t.test('a loopback client has no country', async (t) => {
  t.equal(await countryFor({}), null);
  t.equal(
    await countryFor({}, { 'x-forwarded-for': '8.8.8.8', 'cf-ipcountry': 'DE' }),
    null,
    'headers are ignored unless configured as trusted',
  );
});

t.test('a trusted country header is used as is (when it is a country code)', async (t) => {
  t.equal(await countryFor({ trusted_country_header: 'cf-ipcountry' }, { 'cf-ipcountry': 'de' }), 'DE');
  t.equal(
    await countryFor({ trusted_country_header: 'CF-IPCountry' }, { 'cf-ipcountry': 'XX1' }),
    null,
    'garbage gives null',
  );
  t.equal(await countryFor({ trusted_country_header: 'cf-ipcountry' }), null, 'missing header gives null');
});

t.test('a trusted IP header: its first hop goes through the GeoIP database', async (t) => {
  t.equal(await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': '8.8.8.8, 10.0.0.1' }), 'US');
  t.equal(await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': '81.2.69.160' }), 'GB');
  t.equal(
    await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': '10.1.2.3' }),
    null,
    'private address',
  );
  t.equal(await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': 'nonsense' }), null);
  t.equal(
    await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': '2001:4860:4860::8888' }),
    'US',
    'IPv6',
  );
});

t.test('IPv4-mapped IPv6 peers are looked up as IPv4', async (t) => {
  const req = { headers: {}, socket: { remoteAddress: '::ffff:81.2.69.160' } } as unknown as IncomingMessage;
  t.equal(clientIp(req, {}), '81.2.69.160');
  t.equal(countryOf(req, {}), 'GB');
});

t.test('local addresses are recognised without the database; public ones are not local', async (t) => {
  for (const ip of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.0.9',
    '::1',
    'fd12:3456::1',
    'fe80::1',
  ])
    t.ok(isLocal(ip), `${ip} is local`);
  for (const ip of ['8.8.8.8', '172.32.0.1', '81.2.69.160', '2001:4860:4860::8888', 'fe00::1'])
    t.notOk(isLocal(ip), `${ip} is not local`);
  t.equal(
    await countryFor({ trusted_ip_header: 'x-forwarded-for' }, { 'x-forwarded-for': '192.168.0.7' }),
    null,
    'a private first hop has no country',
  );
});
