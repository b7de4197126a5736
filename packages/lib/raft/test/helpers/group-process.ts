/**
 * One GroupHost as its own OS process, for tests on real processes. Reads one JSON request a line on stdin and
 * answers one JSON line on stdout with the request's id:
 *   {id, op: 'create', groups: [{name, members}]}      -> {id, ok}
 *   {id, op: 'write', writes: [{group, value}]}         -> {id, results: [true | "error"]}
 *   {id, op: 'read', groups: [name]}                    -> {id, results: [value | {error}]}
 *   {id, op: 'status'}                                  -> {id, groups: [[name, term, role, leader]]}
 *   {id, op: 'block', peers: [id]}                      -> {id, ok}
 *
 *   node group-process.js <id> <data dir> <secret> <id=host:port,...>
 */
import { createInterface } from 'node:readline';
import { GroupHost } from '../../src/groups/host.js';
import { Register } from './machines.js';

const [id, dir, secret, list] = process.argv.slice(2) as [string, string, string, string];
const hosts = Object.fromEntries(list.split(',').map((pair) => pair.split('=') as [string, string]));
const host = await GroupHost.open({ id, listen: hosts[id]!, secret, dataDir: dir, hosts, tickMs: 100 });

type Request =
  | { id: number; op: 'create'; groups: Array<{ name: string; members: string[] }> }
  | { id: number; op: 'write'; writes: Array<{ group: string; value: string }> }
  | { id: number; op: 'read'; groups: string[] }
  | { id: number; op: 'status' }
  | { id: number; op: 'block'; peers: string[] };

const message = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

async function answer(request: Request): Promise<object> {
  switch (request.op) {
    case 'create':
      await Promise.all(
        request.groups.map((g) =>
          host.createGroup<string, string, Register>(g.name, {
            members: g.members,
            stateMachine: new Register(),
            requestTimeoutMs: 20_000,
          }),
        ),
      );
      return { ok: true };
    case 'write': {
      const results = await Promise.allSettled(
        request.writes.map((w) => host.group<string, string, Register>(w.group)!.propose(w.value)),
      );
      return { results: results.map((r) => (r.status === 'fulfilled' ? true : message(r.reason))) };
    }
    case 'read': {
      const results = await Promise.allSettled(
        request.groups.map((name) => host.group<string, string, Register>(name)!.read((m) => m.value)),
      );
      return { results: results.map((r) => (r.status === 'fulfilled' ? r.value : { error: message(r.reason) })) };
    }
    case 'status':
      return {
        groups: host.groupNames().map((name) => {
          const s = host.group(name)!.status();
          return [name, s.term, s.role, s.leader];
        }),
      };
    case 'block':
      host.setBlocked(request.peers);
      return { ok: true };
  }
}

const out = (line: object): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  const request = JSON.parse(line) as Request;
  answer(request).then(
    (result) => out({ id: request.id, ...result }),
    (error: unknown) => out({ id: request.id, error: message(error) }),
  );
});
process.on('SIGTERM', () => void host.close().then(() => process.exit(0)));
out({ ready: true });
