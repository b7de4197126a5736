/**
 * A {@link LinkProxy} as its own process, for namespace mode without netem: started inside a member's network
 * namespace by the harness (`ip netns exec NS node proxy-main.js --target-id n1 --listen IP:PORT --target
 * 127.0.0.1:PORT --seed N`). Prints "ready PORT" once listening; takes JSON commands, one a line, on stdin:
 * `{"cut": ["n2", ...]}`, `{"rule": {"source": "n2" | "*", "rule": PacketRule | null}}`, `{"clear": true}`.
 * Exits when stdin closes (so it never outlives the harness).
 */
import { createInterface } from 'node:readline';
import { LinkProxy, type PacketRule } from './proxy.js';

function arg(name: string): string {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? process.argv[at + 1] : undefined;
  if (value === undefined) {
    process.stderr.write(`proxy: missing --${name}\n`);
    process.exit(2);
  }
  return value;
}

function hostPort(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at), port: Number(text.slice(at + 1)) };
}

const proxy = new LinkProxy({
  targetId: arg('target-id'),
  listen: hostPort(arg('listen')),
  target: hostPort(arg('target')),
  seed: Number(arg('seed')),
});
const port = await proxy.start();
process.stdout.write(`ready ${port}\n`);
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  try {
    const command = JSON.parse(line) as {
      cut?: string[];
      rule?: { source: string; rule: PacketRule | null };
      clear?: boolean;
    };
    if (command.cut) proxy.setCut(command.cut);
    if (command.rule) proxy.setRule(command.rule.source, command.rule.rule);
    if (command.clear) proxy.clearRules();
    process.stdout.write('ok\n');
  } catch (e) {
    process.stdout.write(`error ${(e as Error).message}\n`);
  }
});
lines.on('close', () => {
  void proxy.close().then(() => process.exit(0));
});
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.on(signal, () => void proxy.close().then(() => process.exit(0)));
