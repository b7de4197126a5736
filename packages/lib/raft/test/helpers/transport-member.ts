/** One TcpTransport on loopback for transport tests: what it received and what it logged. */
import { TcpTransport, type TcpTransportOptions } from '../../src/transport/tcp.js';
import type { Message, NodeId } from '../../src/types.js';

export const HOST = '127.0.0.1';
export const SECRET = 'the cluster secret';

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Member {
  id: NodeId;
  transport: TcpTransport;
  received: Message[];
  /** Log lines at level warn. */
  warnings: string[];
  /** Every log line, any level. */
  lines: string[];
  address: string;
}

export async function startMember(
  t: Teardown,
  id: NodeId,
  options: Partial<TcpTransportOptions> = {},
): Promise<Member> {
  const warnings: string[] = [];
  const lines: string[] = [];
  const transport = new TcpTransport({
    id,
    listen: { host: HOST, port: 0 },
    secret: SECRET,
    backoffInitialMs: 10,
    backoffMaxMs: 100,
    logger: {
      log: (level, line) => {
        lines.push(line);
        if (level === 'warn') warnings.push(line);
      },
    },
    ...options,
  });
  const received: Message[] = [];
  await transport.start((message) => received.push(message));
  t.teardown(() => transport.close());
  return { id, transport, received, warnings, lines, address: `${HOST}:${transport.address().port}` };
}

export function heartbeat(from: NodeId, to: NodeId, round: number): Message {
  return { type: 'heartbeat', from, to, term: 1, commit: 0, round };
}

export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Gives a transport time to do something it should not (deliver, accept); the assertions after it are negative. */
export const settle = (ms = 300): Promise<unknown> => new Promise((resolve) => setTimeout(resolve, ms));
