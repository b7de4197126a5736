/**
 * Remote mode of the CLI: `cluster status|groups|transfer-leader|add-node|remove-node --endpoints URL,...` talks to
 * members running on other hosts, with no local data folder. The endpoints are the members' HTTP base URLs
 * (https:// when the cluster runs TLS; `--ca FILE` names the CA their certificates are checked against); the
 * token comes from `--token` or $CLUSTER_AUTH_TOKEN. No process is started or stopped here: on a host, the
 * operator's service manager (systemd, docker) does that.
 */
import { readFileSync } from 'node:fs';
import { ClusterClient } from '@raftkit/http';
import { sleep, type MemberStatus } from './processes.js';
import { remoteMode, type RemoteFlags } from './remote-flags.js';
import { CliError } from './state.js';
import { memberRow, mergeGroupRows, withLag, type GroupedStatus, type GroupRow, type StatusRow } from './views.js';

export { remoteOptions, type RemoteFlags } from './remote-flags.js';

/** The answer of one endpoint: its HTTP status and body, or status 0 and why it could not be reached. */
interface RemoteAnswer {
  status: number;
  body: unknown;
  error?: string;
}

interface EndpointStatus {
  url: string;
  status: GroupedStatus | null;
  /** Why there is no status (unreachable, refused, not a member...), for the operator. */
  error: string | null;
}

/** A connection that hangs (a host that drops packets) must not stall a command past this, whatever undici does. */
const CONNECT_GRACE_MS = 1_000;

export class RemoteCluster {
  private readonly client: ClusterClient;

  private constructor(
    readonly urls: string[],
    token: string,
    ca: string | undefined,
  ) {
    this.client = new ClusterClient({ endpoints: urls, token, connections: 2, ...(ca === undefined ? {} : { ca }) });
  }

  /** The remote cluster the flags name, or null without --endpoints (local mode). Bad flags are CliErrors. */
  static open(flags: RemoteFlags): RemoteCluster | null {
    if (!remoteMode(flags)) return null;
    const urls = parseEndpoints(flags.endpoints!);
    const token = flags.token ?? process.env.CLUSTER_AUTH_TOKEN ?? '';
    if (token.length === 0)
      throw new CliError('remote mode needs the cluster token: pass --token or set CLUSTER_AUTH_TOKEN');
    let ca: string | undefined;
    if (flags.ca !== undefined) {
      try {
        ca = readFileSync(flags.ca, 'utf8');
      } catch (e) {
        throw new CliError(`--ca: cannot read ${flags.ca}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
      }
      if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw new CliError(`--ca: ${flags.ca} is not a PEM certificate`);
      if (!urls.some((u) => u.startsWith('https:')))
        throw new CliError('--ca is for https:// endpoints; every endpoint given is http://');
    }
    return new RemoteCluster(urls, token, ca);
  }

  /**
   * Remote mode of a command: runs `work` against the cluster the flags name, then closes it, and says true; says
   * false without --endpoints (the command then runs in local mode).
   */
  static async run(flags: RemoteFlags, work: (remote: RemoteCluster) => Promise<void>): Promise<boolean> {
    const remote = RemoteCluster.open(flags);
    if (remote === null) return false;
    try {
      await work(remote);
    } finally {
      await remote.close();
    }
    return true;
  }

  /** One call to one endpoint (no failover); a connection failure comes back as status 0 with its reason. */
  async ask(index: number, method: string, path: string, body?: object, timeoutMs = 10_000): Promise<RemoteAnswer> {
    let timer: NodeJS.Timeout | undefined;
    const hang = new Promise<RemoteAnswer>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            status: 0,
            body: null,
            error: `no answer within ${((timeoutMs + CONNECT_GRACE_MS) / 1000).toFixed(1)} s`,
          }),
        timeoutMs + CONNECT_GRACE_MS,
      );
    });
    try {
      return await Promise.race([this.client.ask(index, method, path, body, { timeoutMs }), hang]);
    } catch (e) {
      return { status: 0, body: null, error: describeFailure(e) };
    } finally {
      clearTimeout(timer);
    }
  }

  async statuses(timeoutMs = 3_000): Promise<EndpointStatus[]> {
    return Promise.all(
      this.urls.map(async (url, i) => {
        const answer = await this.ask(i, 'GET', '/v1/cluster/status', undefined, timeoutMs);
        if (answer.status === 200 && typeof (answer.body as { id?: unknown } | null)?.id === 'string')
          return { url, status: answer.body as GroupedStatus, error: null };
        // Anything but a member's status (another server at that address, a proxy's page) says so.
        const error =
          answer.status === 0 ||
          answer.status === 401 ||
          (answer.body as { error?: unknown } | null)?.error !== undefined
            ? describeAnswer(answer)
            : `answered ${answer.status} without a member's status (is this a raftkit member's HTTP address?)`;
        return { url, status: null, error };
      }),
    );
  }

  /**
   * The endpoint that leads (the leader of the highest term among those answering), waiting up to `timeoutMs`
   * for an election. Fails naming each endpoint's state: unreachable ones and their reasons, and a leader that
   * the followers name but whose URL is not among the endpoints.
   */
  async findLeader(timeoutMs = 15_000): Promise<{ index: number; status: GroupedStatus }> {
    const deadline = Date.now() + timeoutMs;
    let last: EndpointStatus[] = [];
    for (;;) {
      last = await this.statuses();
      let best: { index: number; status: GroupedStatus } | null = null;
      last.forEach((e, index) => {
        if (e.status?.role === 'leader' && (best === null || e.status.term > best.status.term))
          best = { index, status: e.status };
      });
      if (best !== null) return best;
      // A refused token will not be accepted by waiting: only an election is worth waiting for.
      if (Date.now() >= deadline || last.every((e) => e.error?.startsWith('401') === true)) break;
      await sleep(200);
    }
    const named = new Set(last.map((e) => e.status?.leader_id).filter((l): l is string => typeof l === 'string'));
    const lines = last.map(
      (e) =>
        `  ${e.url}: ${e.status === null ? e.error : `${e.status.id} is ${e.status.role} (term ${e.status.term})`}`,
    );
    const hint =
      last.length > 0 && last.every((e) => e.error?.startsWith('401') === true)
        ? 'every endpoint refused the token'
        : named.size > 0
          ? `the members name ${[...named].join(', ')} as leader, but no endpoint given is it: add its URL to --endpoints`
          : last.every((e) => e.status === null)
            ? 'no endpoint answered'
            : 'no leader is elected (is a majority of members running and connected?)';
    throw new CliError(`no leader among the endpoints: ${hint}\n${lines.join('\n')}`);
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** `cluster status --endpoints`: one row per endpoint, as the local mode (pid is not known from afar). */
export async function remoteStatusRows(
  remote: RemoteCluster,
): Promise<{ rows: StatusRow[]; failures: EndpointStatus[] }> {
  const statuses = await remote.statuses();
  const rows = statuses.map((e) => memberRow(e.status?.id ?? hostOf(e.url), null, e.status, 'unreachable', e.url));
  return { rows: withLag(rows), failures: statuses.filter((e) => e.status === null) };
}

/** `cluster groups --endpoints`: the local mode's rows from the reachable endpoints. */
export async function remoteGroupRows(remote: RemoteCluster, single: string): Promise<GroupRow[]> {
  const answers = await Promise.all(
    remote.urls.map((_, i) => remote.ask(i, 'GET', '/v1/cluster/groups', undefined, 10_000)),
  );
  if (answers.every((a) => a.status === 0))
    throw new CliError(
      `no endpoint answered:\n${remote.urls.map((u, i) => `  ${u}: ${answers[i]!.error}`).join('\n')}`,
    );
  return mergeGroupRows(
    answers,
    async () => (await remote.statuses(5_000)).map((e) => e.status as MemberStatus | null),
    single,
  );
}

/** Asks the leader to hand leadership to member `to` (an id). Returns a line to print. */
export async function remoteTransferLeader(remote: RemoteCluster, to: string): Promise<string> {
  const leader = await remote.findLeader();
  if (leader.status.id === to) return `${to} already leads`;
  if (!leader.status.voters.includes(to))
    throw new CliError(`${to} is not a voter of the cluster (voters: ${leader.status.voters.join(', ')})`);
  const answer = await remote.ask(leader.index, 'POST', '/v1/cluster/transfer-leader', { to }, 30_000);
  if (answer.status !== 200) throw new CliError(`transfer-leader failed: ${describeAnswer(answer)}`);
  return `leader is now ${to}`;
}

/**
 * Asks the leader to add a member that the operator has started on its host with `--join` (it catches up as a
 * learner, then becomes a voter). Nothing is started here.
 */
export async function remoteAddNode(remote: RemoteCluster, id: string, raftAddress: string): Promise<string> {
  const leader = await remote.findLeader();
  if (leader.status.voters.includes(id) || leader.status.learners.includes(id))
    throw new CliError(`${id} is already a member of the cluster`);
  const answer = await remote.ask(leader.index, 'POST', '/v1/cluster/members', { id, address: raftAddress }, 60_000);
  if (answer.status !== 200) {
    // The leader adds a learner first and promotes it once caught up: a learner that never caught up is stranded
    // in the configuration, usually because the leader cannot reach or authenticate it.
    const now = await remote.findLeader(5_000).catch(() => null);
    const stranded = now?.status.learners.includes(id) === true;
    const hint = stranded
      ? `; ${id} stays a learner that never caught up: check that it runs at ${raftAddress}, reachable from the members, with a certificate from the cluster's CA naming ${id}, then remove it with remove-node ${id} or retry`
      : '';
    throw new CliError(`add-node failed: ${describeAnswer(answer)}${hint}`);
  }
  return `added ${id}: raft ${raftAddress}`;
}

/** Asks the leader to remove a member; its process is left to its host (stop it there). */
export async function remoteRemoveNode(remote: RemoteCluster, id: string): Promise<string> {
  const leader = await remote.findLeader();
  if (!leader.status.voters.includes(id) && !leader.status.learners.includes(id))
    throw new CliError(`${id} is not a member of the cluster (voters: ${leader.status.voters.join(', ')})`);
  const answer = await remote.ask(
    leader.index,
    'DELETE',
    `/v1/cluster/members/${encodeURIComponent(id)}`,
    undefined,
    30_000,
  );
  if (answer.status !== 200) throw new CliError(`remove-node failed: ${describeAnswer(answer)}`);
  return `removed ${id} (stop its process on its host)`;
}

/** The URLs of --endpoints: http(s)://host:port, no path; a clear error naming the bad one. */
function parseEndpoints(text: string): string[] {
  const urls: string[] = [];
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0)) {
    let url: URL;
    try {
      url = new URL(part);
    } catch {
      throw new CliError(`--endpoints: ${part} is not a URL (expected e.g. https://10.0.0.1:8101)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new CliError(`--endpoints: ${part} is not http:// or https://`);
    if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '')
      throw new CliError(`--endpoints: ${part} must be a base URL (scheme, host, port), with no path`);
    urls.push(url.origin);
  }
  if (urls.length === 0) throw new CliError('--endpoints: no URL given');
  if (new Set(urls).size !== urls.length) throw new CliError('--endpoints: an endpoint is listed twice');
  return urls;
}

/** Member ids and Raft addresses as the member's flags and the Raft library take them. */
export function checkMemberId(id: string): string {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(id))
    throw new CliError(`--id: ${id} is not a member id (letters, digits, . _ -, at most 64)`);
  return id;
}

export function checkRaftAddress(address: string): string {
  const m = /^(.+):(\d{1,5})$/.exec(address);
  if (m === null || Number(m[2]) < 1 || Number(m[2]) > 65_535)
    throw new CliError(`--raft-address: ${address} is not host:port (the new member's advertised Raft address)`);
  return address;
}

function hostOf(url: string): string {
  return new URL(url).host;
}

function describeAnswer(answer: RemoteAnswer): string {
  if (answer.status === 0) return answer.error ?? 'the member did not answer';
  if (answer.status === 401)
    return '401: the token was refused (pass the cluster token with --token or $CLUSTER_AUTH_TOKEN)';
  const err = (answer.body as { error?: { message?: string } } | null)?.error;
  return `${answer.status} ${err?.message ?? JSON.stringify(answer.body)}`;
}

/** A connection failure in words an operator can act on (TLS problems name --ca). */
function describeFailure(e: unknown): string {
  const error = e as Error & { code?: string; cause?: Error & { code?: string } };
  const code = error.code ?? error.cause?.code;
  // OpenSSL's messages run over several lines and name its source files: the reason is what an operator needs.
  const raw = (error.cause?.message ?? error.message ?? String(e)).split('\n')[0]!;
  const message = /SSL routines:[^:]*:([^:]+):/.exec(raw)?.[1] ?? raw;
  if (code === 'ECONNREFUSED') return 'connection refused (is the member running, and is this its HTTP address?)';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return `host unreachable (${code})`;
  if (code === 'ENOTFOUND') return `unknown host (${message})`;
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT') return `timed out (${code})`;
  if (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET')
    return `connection closed by the member (${message}; an https member called with http://?)`;
  if (code !== undefined && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ALTNAME/.test(code))
    return `TLS: ${message} (pass the cluster CA with --ca, and check the URL's host is in the member certificate)`;
  if (/wrong version number|packet length too long|EPROTO/i.test(message))
    return `TLS handshake failed (${message}; an http member called with https://?)`;
  return `${code ?? 'error'}: ${message}`;
}
