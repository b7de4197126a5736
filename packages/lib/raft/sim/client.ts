/**
 * A simulated client: registers a session, then issues puts, gets and compare-and-sets on a few keys, one at a
 * time. It talks to a random member, gives up on it after a timeout and retries THE SAME request (same client,
 * same seq) at another member, which is exactly what the session layer's exactly-once promise is about.
 * Every op is recorded for the linearizability checker: invoke time, response time, input, output; a write
 * abandoned without an answer is recorded with an unknown outcome (return = Infinity).
 */
import { encodeRequest } from '../src/sessions.js';
import type { NodeId } from '../src/types.js';
import type { SimConfig } from './config.js';
import { fail } from './invariants.js';
import type { KvCommand } from './kv.js';
import type { ClientReply, ClientRequest } from './node.js';
import type { EventQueue } from './queue.js';
import type { Random } from './random.js';

export type KvInput =
  | { f: 'put'; key: string; value: string }
  | { f: 'get'; key: string }
  | { f: 'cas'; key: string; from: string | null; to: string };

/**
 * A poison write is recorded as a compare-and-set from this value, which no client ever writes: to the checker's
 * model it can only fail and change nothing, which is exactly what a command the machine throws on must do.
 */
export const POISON_FROM = '!poison';

export type KvOutput = { f: 'put' } | { f: 'get'; value: string | null } | { f: 'cas'; ok: boolean };

/** Same shape as the linearizability package's Operation: pending ops have return = Infinity, no output. */
export interface HistoryOp {
  clientId: number;
  input: KvInput;
  call: number;
  output: KvOutput | undefined;
  return: number;
  /** For writes: the command's tag ("session/seq"), to find when (whether) an abandoned write took effect. */
  tag?: string;
}

export interface ClientHost {
  readonly queue: EventQueue;
  readonly rng: Random;
  readonly config: SimConfig;
  /** Members a client may talk to now. */
  members(): NodeId[];
  send(node: NodeId, request: ClientRequest): void;
  /** After the fault phase: finish the current op whatever it takes, start no new one. */
  readonly draining: boolean;
  record(op: HistoryOp): void;
  trace(line: () => string): void;
}

interface CurrentOp {
  id: number;
  input: KvInput | null; // null: registration
  seq: number;
  tag: string | undefined;
  bytes: Uint8Array | null;
  call: number;
  attempts: number;
  target: NodeId | null;
}

export class SimClient {
  session: string | null = null;
  private seq = 0;
  private opCounter = 0;
  private op: CurrentOp | null = null;
  /** Bumped per attempt: timers of superseded attempts do nothing. */
  private attemptToken = 0;
  /** Last value this client saw per key, to make compare-and-sets that can succeed. */
  private seen = new Map<string, string | null>();
  done = false;
  completed = 0;
  abandoned = 0;
  retries = 0;

  constructor(
    readonly index: number,
    private readonly host: ClientHost,
  ) {}

  get busy(): boolean {
    return this.op !== null;
  }

  describe(): string {
    const op = this.op;
    if (op === null) return `client ${this.index}: idle${this.done ? ' (done)' : ''}`;
    return `client ${this.index}: ${op.input === null ? 'register' : JSON.stringify(op.input)} seq ${op.seq}, ${op.attempts} attempts, last at ${op.target}`;
  }

  start(): void {
    this.op = {
      id: ++this.opCounter,
      input: null,
      seq: 0,
      tag: undefined,
      bytes: null,
      call: this.host.queue.now,
      attempts: 0,
      target: null,
    };
    this.attempt();
  }

  private nextOp(): void {
    const host = this.host;
    if (host.draining) {
      this.done = true;
      return;
    }
    host.queue.after(host.rng.float(0, 2 * host.config.thinkMs), () => {
      if (host.draining) {
        this.done = true;
        return;
      }
      this.begin(this.makeInput());
    });
  }

  private makeInput(): KvInput {
    const rng = this.host.rng;
    const key = `k${rng.below(this.host.config.keys)}`;
    const r = rng.next();
    if (r < 0.35) return { f: 'get', key };
    const value = `v${this.index}.${this.opCounter + 1}`;
    const poisonRate = this.host.config.poisonRate ?? 0;
    if (poisonRate > 0 && r >= 0.35 && rng.chance(poisonRate)) return { f: 'cas', key, from: POISON_FROM, to: value };
    if (r < 0.75) return { f: 'put', key, value };
    const from = rng.chance(0.15) ? null : (this.seen.get(key) ?? null);
    return { f: 'cas', key, from, to: value };
  }

  private begin(input: KvInput): void {
    let bytes: Uint8Array | null = null;
    let seq = 0;
    let tag: string | undefined;
    if (input.f !== 'get') {
      seq = ++this.seq;
      tag = `${this.session}/${seq}`;
      const command: KvCommand =
        input.f === 'put'
          ? { op: 'put', key: input.key, value: input.value, tag }
          : input.from === POISON_FROM
            ? { op: 'poison', key: input.key, tag }
            : { op: 'cas', key: input.key, from: input.from, to: input.to, tag };
      bytes = encodeRequest<KvCommand>({ t: 'command', client: this.session!, seq, ack: seq - 1, command });
    }
    this.op = { id: ++this.opCounter, input, seq, tag, bytes, call: this.host.queue.now, attempts: 0, target: null };
    this.attempt();
  }

  private attempt(): void {
    const op = this.op!;
    const host = this.host;
    const members = host.members();
    const others = members.filter((m) => m !== op.target);
    const target = host.rng.pick(others.length > 0 ? others : members);
    op.target = target;
    op.attempts++;
    if (op.attempts > 1) this.retries++;
    const token = ++this.attemptToken;
    const input = op.input;
    if (input === null) host.send(target, { kind: 'register', client: this.index });
    else if (input.f === 'get') host.send(target, { kind: 'read', client: this.index, op: op.id, key: input.key });
    else host.send(target, { kind: 'write', client: this.index, seq: op.seq, bytes: op.bytes! });
    host.queue.after(host.config.clientTimeoutMs, () => {
      if (token === this.attemptToken) this.onTimeout();
    });
  }

  private onTimeout(): void {
    const op = this.op!;
    const host = this.host;
    host.trace(() => `client ${this.index} timeout at ${op.target} (attempt ${op.attempts})`);
    if (op.input !== null && !host.draining && op.attempts >= host.config.clientMaxAttempts) {
      this.abandon();
      return;
    }
    this.attempt();
  }

  /** Stop waiting for the current op: a write's outcome is unknown, a read simply never happened. */
  private abandon(): void {
    const op = this.op!;
    this.attemptToken++;
    this.abandoned++;
    if (op.input !== null && op.input.f !== 'get') {
      this.host.record({
        clientId: this.index,
        input: op.input,
        call: op.call,
        output: undefined,
        return: Infinity,
        tag: op.tag!,
      });
    }
    this.op = null;
    this.nextOp();
  }

  onReply(reply: ClientReply, from: NodeId): void {
    const op = this.op;
    if (op === null) return;
    const host = this.host;
    switch (reply.kind) {
      case 'registered':
        if (op.input !== null) return;
        this.session = reply.session;
        host.trace(() => `client ${this.index} registered as ${reply.session}`);
        this.attemptToken++;
        this.op = null;
        this.nextOp();
        return;
      case 'written': {
        if (op.input === null || op.input.f === 'get' || reply.seq !== op.seq) return;
        const result = reply.result;
        const poison = op.input.f === 'cas' && op.input.from === POISON_FROM;
        if (poison) {
          if (result.ok || result.error !== 'apply_failed') {
            fail(
              'poison',
              `client ${this.index} (${this.session}) seq ${op.seq}: a poison command answered ${JSON.stringify(result)}, not apply_failed`,
            );
          }
          this.complete({ f: 'cas', ok: false });
          return;
        }
        if (!result.ok) {
          fail('session', `client ${this.index} (${this.session}) seq ${op.seq}: ${result.error}`);
        }
        if (!('result' in result)) return;
        const r = result.result;
        let output: KvOutput;
        if (op.input.f === 'put') {
          output = { f: 'put' };
          this.seen.set(op.input.key, op.input.value);
        } else {
          const ok = r.op === 'cas' && r.ok;
          output = { f: 'cas', ok };
          if (ok) this.seen.set(op.input.key, op.input.to);
        }
        this.complete(output);
        return;
      }
      case 'read':
        if (op.input === null || op.input.f !== 'get' || reply.op !== op.id) return;
        this.seen.set(op.input.key, reply.value);
        this.complete({ f: 'get', value: reply.value });
        return;
      case 'retry': {
        // Only the member we are currently waiting on can send us elsewhere.
        if (from !== op.target) return;
        if (reply.seq !== undefined && reply.seq !== op.seq) return;
        if (reply.op !== undefined && reply.op !== op.id) return;
        const token = ++this.attemptToken;
        host.trace(() => `client ${this.index}: ${reply.why}`);
        host.queue.after(host.rng.float(2, 20), () => {
          if (token !== this.attemptToken) return;
          if (op.input !== null && !host.draining && op.attempts >= host.config.clientMaxAttempts) this.abandon();
          else this.attempt();
        });
        return;
      }
    }
  }

  private complete(output: KvOutput): void {
    const op = this.op!;
    this.attemptToken++;
    this.completed++;
    const record: HistoryOp = {
      clientId: this.index,
      input: op.input!,
      call: op.call,
      output,
      return: this.host.queue.now,
    };
    if (op.tag !== undefined) record.tag = op.tag;
    this.host.record(record);
    this.op = null;
    this.nextOp();
  }
}
