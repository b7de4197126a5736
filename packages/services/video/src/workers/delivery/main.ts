/**
 * Runs one cache tier as a standalone process from a JSON argument (tests and the benchmark start tiers in front
 * of an origin of their own without a whole cluster):
 *   node dist/src/delivery/main.js '{"id":"edge1","kind":"edge","httpAddress":"127.0.0.1:8641","dataDir":"...",
 *     "token":"...","upstreamUrl":"http://.../media","downstream":[{"id":"...","url":"http://..."}],"settings":{}}'
 * Stops on SIGTERM or SIGINT.
 */
import { jsonLogger, ownerOnlyFiles } from '@raftkit/http';
import { EDGE_ROLE, REGIONAL_ROLE, edgeRole, regionalRole } from './process.js';
import type { TierArgs } from './spawn.js';

type Args = TierArgs;

// Before any I/O: the tier's cached objects are its owner's only, as in a cluster's workers.
ownerOnlyFiles();

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const logger = jsonLogger(
  () => ({ id: args.id }),
  (line) => process.stderr.write(line),
);
const settings = { ...args.settings };
// The roles find their neighbours among the cluster's workers; here they are given, so describe them that way.
const url = new URL(args.upstreamUrl);
const upstreamPeer = { id: 'upstream', role: args.kind === 'edge' ? REGIONAL_ROLE : 'origin', httpAddress: url.host };
if (args.kind === 'regional') settings['origin_url'] = args.upstreamUrl;
const downstream = (args.downstream ?? []).map((d) => ({
  id: d.id,
  role: EDGE_ROLE,
  httpAddress: new URL(d.url).host,
}));
const role = args.kind === 'edge' ? edgeRole : regionalRole;
const running = await role.start({
  id: args.id,
  role: role.role,
  index: 1,
  dataDir: args.dataDir,
  httpAddress: args.httpAddress,
  tcpAddress: '127.0.0.1:0',
  members: [],
  workers: [upstreamPeer, ...downstream],
  tokens: [args.token],
  settings,
  logger,
});
process.stdout.write(JSON.stringify({ listening: running.httpPort, id: args.id }) + '\n');
const stop = (): void => {
  void running.stop().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
