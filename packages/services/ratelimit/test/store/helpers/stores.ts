/** Real store processes for tests: spawned from store-main.js on free 127.0.0.1 ports, always torn down. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { PeerAddress } from '@raftkit/http';
import { freePort } from '@raftkit/testkit';

const entry = fileURLToPath(new URL('./store-main.js', import.meta.url));

export interface StoreGroup {
  token: string;
  /** In start order: store i belongs to region ((i - 1) % regions) + 1. */
  stores: PeerAddress[];
  /** SIGKILL store `index` (1-based) and wait for it to be gone. */
  kill(index: number): Promise<void>;
  /** Send a signal to store `index` (SIGSTOP / SIGCONT to pause and resume it). */
  signal(index: number, signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startStores(count: number, settings: Record<string, string> = {}): Promise<StoreGroup> {
  const token = randomBytes(24).toString('base64url');
  const stores: PeerAddress[] = [];
  for (let i = 1; i <= count; i++)
    stores.push({
      id: `store${i}`,
      role: 'store',
      httpAddress: `127.0.0.1:${await freePort()}`,
      tcpAddress: `127.0.0.1:${await freePort()}`,
    });
  const children: ChildProcess[] = [];
  const stop = async (): Promise<void> => {
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(children.map(exited));
  };
  try {
    for (const [i, store] of stores.entries()) {
      const config = {
        id: store.id,
        index: i + 1,
        httpAddress: store.httpAddress,
        tcpAddress: store.tcpAddress,
        workers: stores,
        tokens: [token],
        settings,
      };
      const child = spawn(process.execPath, [entry, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${store.id} not ready in 10 s: ${stderr}`)), 10_000);
        child.stdout!.on('data', (d: Buffer) => {
          if (d.toString().includes('ready')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`${store.id} exited with ${code}: ${stderr}`));
        });
      });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    token,
    stores,
    kill: async (index) => {
      const child = children[index - 1]!;
      child.kill('SIGKILL');
      await exited(child);
    },
    signal: (index, signal) => void children[index - 1]!.kill(signal),
    stop: async () => {
      for (const child of children) child.kill('SIGCONT');
      await stop();
    },
  };
}
