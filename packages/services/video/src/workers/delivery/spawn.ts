/**
 * Starts a cache tier as a child process (main.ts) and waits until it listens: how tests and the benchmark put a
 * regional tier and edges in front of an origin of their own without a whole cluster.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('./main.js', import.meta.url));

export interface TierArgs {
  id: string;
  kind: 'edge' | 'regional';
  httpAddress: string;
  dataDir: string;
  /** The cluster token: the tier's API accepts it and presents it upstream. */
  token: string;
  /** The regional tier's `/media` base for an edge; the origin's GET-by-key base for the regional tier. */
  upstreamUrl: string;
  downstream?: Array<{ id: string; url: string }>;
  settings?: Record<string, string>;
}

export interface TierChild {
  id: string;
  url: string;
  child: ChildProcess;
  /** SIGTERM, then the exit. */
  stop(): Promise<void>;
}

export async function spawnTier(
  args: TierArgs,
  /** nodeArgs: flags for node before the script (the benchmark's --profile passes --cpu-prof and its folder). */
  options: { stderr?: 'ignore' | 'inherit'; nodeArgs?: readonly string[] } = {},
): Promise<TierChild> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), MAIN, JSON.stringify(args)], {
    stdio: ['ignore', 'pipe', options.stderr === 'inherit' ? 'inherit' : 'pipe'],
  });
  child.stderr?.resume();
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    const onExit = (code: number | null): void => reject(new Error(`${args.id} exited with ${code} before listening`));
    child.once('exit', onExit);
    lines.on('line', (line) => {
      if (!line.includes('"listening"')) return;
      child.off('exit', onExit);
      resolve();
    });
  });
  const url = `http://${args.httpAddress}`;
  return {
    id: args.id,
    url,
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
