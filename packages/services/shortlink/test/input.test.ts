/** Create validation: long_url, custom_alias and expiry rules, each failure a 400 naming the field. */
import t from 'tap';
import { HttpError } from '@raftkit/http';
import { MAX_URL_LENGTH, parseCreate, parseExpiry, parseLongUrl, shortCodeParam } from '../src/input.js';

const NOW = Date.parse('2030-06-15T12:00:00Z');

function rejects(
  test: { ok(value: unknown, message: string): void },
  fn: () => unknown,
  field: string,
  code: string,
  what: string,
): void {
  try {
    fn();
    test.ok(false, `${what}: accepted`);
  } catch (e) {
    test.ok(
      e instanceof HttpError && e.status === 400 && e.details.field === field && e.code === code,
      `${what}: 400 ${code} on ${field} (${(e as Error).message})`,
    );
  }
}

t.test('long_url: http(s) URLs accepted and normalised; everything else a 400 naming long_url', async (t) => {
  t.equal(parseLongUrl('https://example.com'), 'https://example.com/');
  t.equal(parseLongUrl('http://EXAMPLE.com/a b'.replace(' ', '%20')), 'http://example.com/a%20b');
  t.equal(
    parseLongUrl('https://example.com/ünï?q=ä'),
    'https://example.com/%C3%BCn%C3%AF?q=%C3%A4',
    'non-ASCII percent-encoded (safe in Location)',
  );
  t.equal(parseLongUrl('https://example.com/' + 'a'.repeat(MAX_URL_LENGTH - 20)).length, MAX_URL_LENGTH - 20 + 20);
  for (const [bad, what] of [
    [undefined, 'missing'],
    [42, 'a number'],
    ['', 'empty'],
    ['example.com/path', 'no scheme'],
    ['ftp://example.com/', 'ftp'],
    ['javascript:alert(1)', 'javascript'],
    ['mailto:a@example.com', 'mailto'],
    ['https://exa mple.com/', 'a space'],
    ['https://example.com/\n', 'a newline'],
    ['https://example.com/\u0000', 'a control character'],
    ['https://', 'no host'],
    ['https://example.com/' + 'a'.repeat(MAX_URL_LENGTH), 'too long'],
    ['https://example.com/' + 'ü'.repeat(MAX_URL_LENGTH / 4), 'too long once percent-encoded'],
  ] as const) {
    rejects(t, () => parseLongUrl(bad), 'long_url', 'invalid_url', String(what));
  }
});

t.test('custom_alias: 8 to 64 of A-Z a-z 0-9 _ -; shorter, longer or other characters refused', async (t) => {
  t.same(parseCreate({ long_url: 'https://a.example/', custom_alias: 'my_Alias-01' }, NOW).alias, 'my_Alias-01');
  t.same(parseCreate({ long_url: 'https://a.example/', custom_alias: 'x'.repeat(64) }, NOW).alias, 'x'.repeat(64));
  t.same(parseCreate({ long_url: 'https://a.example/', custom_alias: null }, NOW).alias, null);
  for (const bad of ['abcdefg', 'x'.repeat(65), 'has space1', 'dots.are.no', 'ünicode-aa', 42, '']) {
    rejects(
      t,
      () => parseCreate({ long_url: 'https://a.example/', custom_alias: bad }, NOW),
      'custom_alias',
      'invalid_alias',
      JSON.stringify(bad),
    );
  }
});

t.test('body: must be an object; unknown fields are named', async (t) => {
  rejects(t, () => parseCreate([], NOW), 'body', 'invalid_body', 'an array');
  rejects(t, () => parseCreate('x', NOW), 'body', 'invalid_body', 'a string');
  rejects(
    t,
    () => parseCreate({ long_url: 'https://a.example/', alias: 'abcdefgh' }, NOW),
    'alias',
    'unknown_field',
    'a misspelt field',
  );
});

t.test('expiry: default 5 years; ISO-8601 timestamps and durations; past, too far and malformed refused', async (t) => {
  t.equal(parseExpiry(undefined, NOW), Date.parse('2035-06-15T12:00:00Z'), 'default: 5 calendar years');
  t.equal(parseExpiry(null, NOW), Date.parse('2035-06-15T12:00:00Z'));
  t.equal(parseExpiry('2031-01-01T00:00:00Z', NOW), Date.parse('2031-01-01T00:00:00Z'));
  t.equal(parseExpiry('2031-01-01T02:00+02:00', NOW), Date.parse('2031-01-01T00:00:00Z'), 'with an offset');
  t.equal(parseExpiry('2031-01-01T00:00:00.250Z', NOW), Date.parse('2031-01-01T00:00:00.250Z'));
  t.equal(parseExpiry('P30D', NOW), NOW + 30 * 86_400_000);
  t.equal(parseExpiry('PT12H', NOW), NOW + 12 * 3_600_000);
  t.equal(parseExpiry('P2W', NOW), NOW + 14 * 86_400_000);
  t.equal(parseExpiry('PT1S', NOW), NOW + 1000);
  t.equal(parseExpiry('P1Y6M', NOW), Date.parse('2031-12-15T12:00:00Z'), 'years and months on the calendar');
  t.equal(parseExpiry('P1DT1H1M1S', NOW), NOW + 90_061_000);
  t.equal(parseExpiry('P100Y', NOW), Date.parse('2130-06-15T12:00:00Z'), 'the maximum');
  for (const [bad, what] of [
    ['2020-01-01T00:00:00Z', 'in the past'],
    ['2030-06-15T12:00:00Z', 'now'],
    ['P0D', 'a zero duration'],
    ['P101Y', 'over 100 years'],
    ['P36600D', 'over 100 years in days'],
    ['2200-01-01T00:00:00Z', 'a timestamp over 100 years away'],
    ['2031-01-01', 'a date without time'],
    ['2031-01-01T00:00:00', 'no zone'],
    ['2031-02-30T00:00:00Z', 'not a real date'],
    ['P', 'empty duration'],
    ['PT', 'empty time part'],
    ['P1.5D', 'fractions'],
    ['-P1D', 'negative'],
    ['tomorrow', 'words'],
    [86400, 'a number'],
  ] as const) {
    rejects(t, () => parseExpiry(bad, NOW), 'expiry', 'invalid_expiry', `${JSON.stringify(bad)} (${what})`);
  }
});

t.test('short codes in paths: 7 base62 characters or an alias', async (t) => {
  t.equal(shortCodeParam('aB3dE5g'), 'aB3dE5g');
  t.equal(shortCodeParam('my-alias_1'), 'my-alias_1');
  for (const bad of ['abc', 'abc_def', 'abc.defgh', 'x'.repeat(65), undefined]) {
    t.throws(() => shortCodeParam(bad), { status: 400, code: 'invalid_code' }, JSON.stringify(bad));
  }
});
