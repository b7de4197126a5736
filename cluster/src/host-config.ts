/**
 * The settings of a member or worker process started on its own host: command-line flags, or a JSON config file
 * (`--config FILE`) whose keys are the flags' names without the dashes ("advertise-raft", "tls-ca"...), with flags
 * winning over the file. Everything is checked here, before anything starts, so a mistake is one clear line and
 * exit status 2 (ConfigError), never a stack trace from deep inside a listener.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { hostPort, readClusterTls, type ClusterTls } from '@raftkit/http';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A flag: its name (the config file's key), what it holds, and its help text. */
export interface FlagSpec {
  name: string;
  kind: 'string' | 'address' | 'addresses' | 'integer' | 'pairs';
  help: string;
  /** The value when neither a flag nor the file gives one; none: the setting is required. */
  default?: string;
  /** Optional and without a default. */
  optional?: boolean;
}

/** The flags' values, by name, after merging the file: a string, or a map for `addresses` (id -> host:port) and `pairs`. */
export type Settings = Record<string, string | Record<string, string> | undefined>;

const ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Parses `argv` (without node and the script) against `flags` plus `--config FILE`. Throws ConfigError naming
 * the flag (or config key) at fault; `--help` prints the usage and exits 0.
 */
export function parseSettings(
  name: string,
  description: string,
  flags: readonly FlagSpec[],
  argv: readonly string[],
): Settings {
  const program = new Command()
    .name(name)
    .description(description)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined });
  program.option('--config <file>', 'JSON file with the same keys as the flags (flags win)');
  for (const f of flags)
    program.option(
      `--${f.name} <${f.kind === 'addresses' ? 'list' : 'value'}>`,
      f.help + (f.default !== undefined ? ` (default ${f.default})` : ''),
    );
  try {
    program.parse([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') process.exit(0);
      throw new ConfigError(e.message.replace(/^error: /, ''));
    }
    throw e;
  }
  const given = program.opts<Record<string, string | undefined>>();
  const file = given.config === undefined ? {} : readConfigFile(given.config, flags);
  const settings: Settings = {};
  for (const f of flags) {
    const fromFlag = given[camel(f.name)];
    const raw: unknown = fromFlag ?? file[f.name] ?? f.default;
    const where =
      fromFlag !== undefined
        ? `--${f.name}`
        : file[f.name] !== undefined
          ? `${given.config}: "${f.name}"`
          : `--${f.name}`;
    if (raw === undefined) {
      if (f.optional === true || f.kind === 'addresses' || f.kind === 'pairs') {
        settings[f.name] = f.kind === 'addresses' || f.kind === 'pairs' ? {} : undefined;
        continue;
      }
      throw new ConfigError(`--${f.name} is required (or "${f.name}" in --config)`);
    }
    settings[f.name] = checkValue(f, raw, where);
  }
  return settings;
}

function readConfigFile(path: string, flags: readonly FlagSpec[]): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`--config: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`--config: ${path} is not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError(`--config: ${path} must hold a JSON object`);
  const known = new Set(flags.map((f) => f.name));
  for (const key of Object.keys(parsed)) {
    // A misspelt key silently ignored would leave a member with a default it was meant not to have.
    if (!known.has(key))
      throw new ConfigError(
        `--config: ${path}: unknown key "${key}" (keys are the flag names: ${[...known].join(', ')})`,
      );
  }
  return parsed as Record<string, unknown>;
}

function checkValue(f: FlagSpec, raw: unknown, where: string): string | Record<string, string> {
  if (f.kind === 'pairs') {
    // In a file, an object {"key": "value"}; as a flag, "key=value,key=value".
    if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
      for (const [key, value] of Object.entries(raw))
        if (typeof value !== 'string') throw new ConfigError(`${where}: the value of ${key} must be a string`);
      return raw as Record<string, string>;
    }
    if (typeof raw !== 'string') throw new ConfigError(`${where}: expected "key=value,..." or an object of strings`);
    const pairs: Record<string, string> = {};
    for (const part of raw.split(',').filter((p) => p.length > 0)) {
      const eq = part.indexOf('=');
      if (eq <= 0) throw new ConfigError(`${where}: expected key=value, got ${JSON.stringify(part)}`);
      pairs[part.slice(0, eq)] = part.slice(eq + 1);
    }
    return pairs;
  }
  if (f.kind === 'addresses') {
    // In a file, either the flag's text ("n1=host:port,...") or an object {"n1": "host:port"}.
    if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
      const list: Record<string, string> = {};
      for (const [id, address] of Object.entries(raw)) {
        if (typeof address !== 'string')
          throw new ConfigError(`${where}: the address of ${id} must be a string "host:port"`);
        list[checkId(id, where)] = checkAddress(address, where);
      }
      return list;
    }
    if (typeof raw !== 'string')
      throw new ConfigError(`${where}: expected "id=host:port,..." or an object of id to "host:port"`);
    return addressList(raw, where);
  }
  const text = typeof raw === 'number' && f.kind === 'integer' ? String(raw) : raw;
  if (typeof text !== 'string' || text.length === 0) throw new ConfigError(`${where}: expected a non-empty string`);
  if (f.kind === 'address') return checkAddress(text, where);
  if (f.kind === 'integer') {
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new ConfigError(`${where}: expected a positive integer, got ${JSON.stringify(text)}`);
  }
  return text;
}

/** "id=host:port,..." -> {id: "host:port"}. */
function addressList(text: string, where: string): Record<string, string> {
  const list: Record<string, string> = {};
  for (const part of text.split(',').filter((p) => p.trim().length > 0)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new ConfigError(`${where}: expected id=host:port, got ${JSON.stringify(part)}`);
    list[checkId(part.slice(0, eq).trim(), where)] = checkAddress(part.slice(eq + 1).trim(), where);
  }
  return list;
}

function checkId(id: string, where: string): string {
  if (!ID.test(id)) throw new ConfigError(`${where}: ${JSON.stringify(id)} is not an id (letters, digits, . _ -)`);
  return id;
}

function checkAddress(address: string, where: string): string {
  try {
    hostPort(address);
  } catch {
    throw new ConfigError(`${where}: expected host:port, got ${JSON.stringify(address)}`);
  }
  return address;
}

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The listen address's host is a wildcard: it says nothing about where others reach the process. */
function isWildcard(address: string): boolean {
  const [host] = hostPort(address);
  return host === '0.0.0.0' || host === '::' || host === '';
}

/**
 * The advertised address: given, or else the listen address, which must then be reachable as it is (not a
 * wildcard, not port 0: another host could not dial it).
 */
export function advertised(listen: string, advertise: string | undefined, flag: string): string {
  if (advertise !== undefined) {
    if (isWildcard(advertise) || hostPort(advertise)[1] === 0)
      throw new ConfigError(`--advertise-${flag}: ${advertise} cannot be dialled; give this host's address`);
    return advertise;
  }
  if (isWildcard(listen))
    throw new ConfigError(
      `--${flag} ${listen} listens on every interface: give --advertise-${flag} host:port (the address others dial)`,
    );
  return listen;
}

/** The TLS files of the settings, read (ConfigError naming the file when one is missing or not PEM). */
export function tlsOf(settings: Settings): ClusterTls | null {
  try {
    return readClusterTls({
      cert: str(settings['tls-cert']),
      key: str(settings['tls-key']),
      ca: str(settings['tls-ca']),
    });
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}

/** The token: CLUSTER_AUTH_TOKEN, else the first line of --token-file. */
export function tokenOf(settings: Settings): string {
  const file = str(settings['token-file']);
  let token = process.env.CLUSTER_AUTH_TOKEN ?? '';
  if (token.length === 0 && file !== undefined) {
    try {
      token = readFileSync(file, 'utf8').trim();
    } catch (e) {
      throw new ConfigError(`--token-file: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  }
  if (token.length === 0)
    throw new ConfigError('no token: pass --token-file (a file holding the cluster token) or set CLUSTER_AUTH_TOKEN');
  return token;
}

/** A string setting (undefined when absent). */
export function str(value: Settings[string]): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** An addresses setting ({} when absent). */
export function addresses(value: Settings[string]): Record<string, string> {
  return typeof value === 'object' && value !== undefined ? value : {};
}

/**
 * RAFTKIT_SESSION_TIMEOUT_MS: how long a client session lives without a command (milliseconds, 1 s .. 1 day), for
 * every group of a member; unset, the library's default (10 minutes). An operator's and tests' knob: tests shorten
 * it to show that an idle service answers its first write.
 */
export function sessionTimeoutFromEnv(
  text: string | undefined = process.env.RAFTKIT_SESSION_TIMEOUT_MS,
): { sessionTimeoutMs: number } | undefined {
  if (text === undefined || text === '') return undefined;
  const ms = Number(text);
  if (!Number.isInteger(ms) || ms < 1_000 || ms > 86_400_000)
    throw new ConfigError(
      `RAFTKIT_SESSION_TIMEOUT_MS: expected milliseconds from 1000 to 86400000, got ${JSON.stringify(text)}`,
    );
  return { sessionTimeoutMs: ms };
}
