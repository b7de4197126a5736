/**
 * The flags of remote mode (src/remote.ts), apart from it: every command registers them at start, while remote.ts
 * (and the HTTP client it loads) is imported only when a command runs with --endpoints.
 */
import type { Command } from 'commander';
import { CliError } from './state.js';

export interface RemoteFlags {
  endpoints?: string;
  token?: string;
  ca?: string;
}

/** The flags of remote mode, on a command that also has a local mode. */
export function remoteOptions(command: Command): Command {
  return command
    .option(
      '--endpoints <urls>',
      "remote members' HTTP URLs, e.g. https://10.0.0.1:8101,https://10.0.0.2:8101 (remote mode: no data folder)",
    )
    .option('--token <token>', 'with --endpoints: the cluster token (default: $CLUSTER_AUTH_TOKEN)')
    .option('--ca <file>', "with --endpoints: PEM of the CA that signed the members' certificates (https endpoints)");
}

/** True with --endpoints; false in local mode, where --token and --ca are refused. */
export function remoteMode(flags: RemoteFlags): boolean {
  if (flags.endpoints !== undefined) return true;
  if (flags.token !== undefined || flags.ca !== undefined)
    throw new CliError(
      '--token and --ca go with --endpoints (remote mode); a local cluster keeps its token in its data folder',
    );
  return false;
}
