/**
 * The country of a click: from a trusted edge header when one is configured, else from the client IP through the
 * GeoIP database shipped in geoip-country (loaded on first use: it reads ~8 MB, which only app servers need).
 */
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { isIP, type Socket } from 'node:net';

interface GeoIp {
  lookup(ip: string): { country?: string } | null;
}

let geoIp: GeoIp | undefined;
function database(): GeoIp {
  geoIp ??= createRequire(import.meta.url)('geoip-country') as GeoIp;
  return geoIp;
}

const COUNTRY = /^[A-Z]{2}$/;

/**
 * `settings.trusted_country_header` (e.g. cf-ipcountry) wins when set; else the IP from
 * `settings.trusted_ip_header` (first hop of e.g. x-forwarded-for) when set, else the socket's peer.
 * Unknown, loopback and private addresses give null.
 */
export function countryOf(req: IncomingMessage, settings: Record<string, string>): string | null {
  const countryHeader = settings.trusted_country_header;
  if (countryHeader) {
    const value = headerValue(req, countryHeader)?.trim().toUpperCase();
    return value !== undefined && COUNTRY.test(value) ? value : null;
  }
  if (settings.trusted_ip_header) return countryOfIp(clientIp(req, settings));
  // The peer address is the connection's: looked up once per keep-alive connection, not once per redirect.
  let country = socketCountry.get(req.socket);
  if (country === undefined) {
    country = countryOfIp(clientIp(req, settings));
    socketCountry.set(req.socket, country);
  }
  return country;
}

const socketCountry = new WeakMap<Socket, string | null>();

function countryOfIp(ip: string | null): string | null {
  // Loopback, private and link-local addresses have no country: no database lookup (nor loading it) for them.
  if (ip === null || isLocal(ip)) return null;
  try {
    const country = database().lookup(ip)?.country;
    return country !== undefined && COUNTRY.test(country) ? country : null;
  } catch {
    return null;
  }
}

/** The client's IP as a plain IPv4 or IPv6 string, or null when it is missing or not an address. */
export function clientIp(req: IncomingMessage, settings: Record<string, string>): string | null {
  const ipHeader = settings.trusted_ip_header;
  const raw = ipHeader ? headerValue(req, ipHeader)?.split(',')[0] : req.socket.remoteAddress;
  if (raw === undefined) return null;
  let ip = raw.trim();
  // A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d; the database keys them as IPv4.
  if (ip.toLowerCase().startsWith('::ffff:') && isIP(ip.slice(7)) === 4) ip = ip.slice(7);
  return isIP(ip) === 0 ? null : ip;
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

/** Loopback, private (RFC 1918, unique local) or link-local: an address no GeoIP database places anywhere. */
export function isLocal(ip: string): boolean {
  if (isIP(ip) === 4) {
    const [a, b] = ip.split('.', 2).map(Number) as [number, number];
    return (
      a === 127 ||
      a === 10 ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 169 && b === 254) ||
      a === 0
    );
  }
  const lower = ip.toLowerCase();
  return lower === '::1' || lower === '::' || /^f[cd][0-9a-f]{0,2}:/.test(lower) || /^fe[89ab][0-9a-f]?:/.test(lower);
}
