/**
 * TLS for the HTTP side of a cluster whose processes run on several hosts: a process serves its HTTP API over
 * HTTPS with its member certificate, and every call it makes to another process of the cluster (a follower
 * forwarding to a group's leader, a worker calling the members, the CLI) trusts the cluster's CA.
 *
 * One process has one cluster, so the CA it trusts is a process-wide setting (`useClusterTls`), taken by every
 * ClusterClient and GroupRouter and by undici's global dispatcher (plain `fetch`): services need not thread it
 * through. Explicit options (`ca` on the clients, `tls` on processHttp) win, for tools and tests holding several.
 */
import { readFileSync } from 'node:fs';
import { Agent, setGlobalDispatcher } from 'undici';

/** PEM text of a certificate and its key (the server side) and of the CA that signs every process's certificate. */
export interface ClusterTls {
  cert?: string;
  key?: string;
  ca: string;
}

/** Paths of the PEM files, as the command-line flags name them. */
export interface ClusterTlsFiles {
  cert?: string | undefined;
  key?: string | undefined;
  ca?: string | undefined;
}

let processTls: ClusterTls | null = null;

/**
 * Reads the PEM files. A certificate needs its key and the CA (a member's certificate is only worth serving to
 * peers that check it); a CA alone is a client's (a worker or CLI that calls members over HTTPS). Throws an Error
 * whose message names the missing flag or unreadable file, for a command line to print.
 */
export function readClusterTls(files: ClusterTlsFiles): ClusterTls | null {
  const { cert, key, ca } = files;
  if (cert === undefined && key === undefined && ca === undefined) return null;
  if ((cert === undefined) !== (key === undefined)) throw new Error('--tls-cert and --tls-key go together');
  if (ca === undefined)
    throw new Error('--tls-ca is needed with --tls-cert (the CA that signs every member certificate)');
  const read = (path: string, flag: string): string => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new Error(`${flag}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
    if (!text.includes('-----BEGIN ')) throw new Error(`${flag}: ${path} is not a PEM file`);
    return text;
  };
  return {
    ca: read(ca, '--tls-ca'),
    ...(cert !== undefined && key !== undefined ? { cert: read(cert, '--tls-cert'), key: read(key, '--tls-key') } : {}),
  };
}

/**
 * Makes `tls` this process's cluster TLS: its HTTP listeners serve HTTPS with its certificate (when it has one),
 * and its calls to https:// URLs trust its CA (plain `fetch` included, through undici's global dispatcher).
 */
export function useClusterTls(tls: ClusterTls): void {
  processTls = tls;
  setGlobalDispatcher(new Agent({ connect: { ca: tls.ca } }));
}

/** The process's cluster TLS, if `useClusterTls` set one. */
export function clusterTls(): ClusterTls | null {
  return processTls;
}

/**
 * "https" when this process's cluster runs TLS, else "http": the scheme of the members' HTTP APIs. (Workers serve
 * plain HTTP: they have no certificate of their own; see cluster/README.md, "Several hosts".)
 */
export function clusterScheme(): 'http' | 'https' {
  return processTls === null ? 'http' : 'https';
}

/** The base URL of the member whose HTTP API is at `address` (host:port), in the cluster's scheme. */
export function clusterUrl(address: string): string {
  return `${clusterScheme()}://${address}`;
}

/** undici Pool/Agent options trusting `ca` (else the process's CA, else the system's). */
export function connectOptions(ca?: string | Buffer): { connect?: { ca: string | Buffer } } {
  const trusted = ca ?? processTls?.ca;
  return trusted === undefined ? {} : { connect: { ca: trusted } };
}
