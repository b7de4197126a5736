/**
 * One member of a replicated bank ledger, as its own OS process: the example of running @raftkit/raft across
 * processes. Start three (each with its own directory, all with the same secret and member list):
 *
 *   node member.js m1 ./data/m1 <secret> m1=127.0.0.1:7001,m2=127.0.0.1:7002,m3=127.0.0.1:7003
 *
 * It reads one JSON request a line on stdin and answers one JSON line on stdout, with the request's `id`:
 *   {"id":1,"deposit":{"account":"alice","amount":100}}        -> {"id":1,"ok":true,"result":100}
 *   {"id":2,"transfer":{"from":"alice","to":"bob","amount":30}} -> {"id":2,"ok":true,"result":70}
 *   {"id":3,"balances":true}                                    -> {"id":3,"ok":true,"result":{"alice":70,"bob":30}}
 *   {"id":4,"status":true}                                      -> {"id":4,"ok":true,"result":{"leader":"m2"}}
 * A refused transfer answers {"ok":false,"error":"..."}: the state machine throws, the proposer gets an
 * ApplyError, and the group goes on. SIGTERM stops the member cleanly; after SIGKILL, starting it again with
 * the same directory recovers it from LevelDB and it catches up from the leader.
 */
import { createInterface } from 'node:readline';
import { ApplyError, LevelStorage, RaftNode, TcpTransport, type StateMachine } from '@raftkit/raft';

type Command = { deposit: { account: string; amount: number } } | { transfer: { from: string; to: string; amount: number } };

/** Deterministic and free of I/O: every member applies the same entries to the same state. */
export class Ledger implements StateMachine<Command, number> {
  balances = new Map<string, number>();

  apply(command: Command): number {
    if ('deposit' in command) {
      const { account, amount } = command.deposit;
      if (!(amount > 0)) throw new Error('a deposit must be positive');
      const balance = (this.balances.get(account) ?? 0) + amount;
      this.balances.set(account, balance);
      return balance;
    }
    const { from, to, amount } = command.transfer;
    const available = this.balances.get(from) ?? 0;
    // Throwing is how a command is refused: the same on every member, answered to the proposer as ApplyError.
    if (!(amount > 0) || available < amount) throw new Error(`insufficient funds: ${from} has ${available}`);
    this.balances.set(from, available - amount);
    this.balances.set(to, (this.balances.get(to) ?? 0) + amount);
    return available - amount;
  }

  snapshot(): Uint8Array {
    return Buffer.from(JSON.stringify([...this.balances]));
  }

  restore(data: Uint8Array): void {
    this.balances = new Map(JSON.parse(Buffer.from(data).toString()) as Array<[string, number]>);
  }
}

const [id, dir, secret, list] = process.argv.slice(2);
if (id === undefined || dir === undefined || secret === undefined || list === undefined) {
  process.stderr.write('usage: member.js <id> <data dir> <secret> <id=host:port,...>\n');
  process.exit(2);
}
const members = Object.fromEntries(list.split(',').map((pair) => pair.split('=') as [string, string]));
const [host, port] = members[id]!.split(':') as [string, string];

const node = await RaftNode.start({
  id,
  bootstrap: members,
  stateMachine: new Ledger(),
  storage: new LevelStorage(dir),
  transport: new TcpTransport({ id, listen: { host, port: Number(port) }, secret }),
  tickMs: 50,
});

type Request = { id: number } & ({ deposit: { account: string; amount: number } } | { transfer: { from: string; to: string; amount: number } } | { balances: true } | { status: true });

async function answer(request: Request): Promise<unknown> {
  if ('balances' in request) return node.read((machine) => Object.fromEntries(machine.balances));
  if ('status' in request) return { leader: node.leaderId };
  if ('deposit' in request) return node.propose({ deposit: request.deposit });
  return node.propose({ transfer: request.transfer });
}

const out = (line: object): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  let request: Request;
  try {
    request = JSON.parse(line) as Request;
  } catch {
    out({ id: null, ok: false, error: 'not JSON' });
    return;
  }
  answer(request).then(
    (result) => out({ id: request.id, ok: true, result }),
    (error: unknown) => out({ id: request.id, ok: false, error: String((error as Error).message), refused: error instanceof ApplyError }),
  );
});

process.on('SIGTERM', () => {
  void node.stop().then(() => process.exit(0));
});
out({ id: 0, ok: true, result: 'ready' });
