/** Running system commands (ip, nft, tc, apt-get) with their output captured. */
import { spawn } from 'node:child_process';

class CommandError extends Error {
  override name = 'CommandError';
  constructor(
    readonly command: string,
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`${command} failed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' / ')}`);
  }
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; never throws for a non-zero exit (see {@link run}). */
export function runCommand(
  command: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: options.env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: 127, stdout, stderr: stderr + String(e.message) });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
  });
}

/** Runs a command and throws a {@link CommandError} unless it exits 0. */
export async function run(
  command: string,
  args: readonly string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const result = await runCommand(command, args, options);
  if (result.code !== 0)
    throw new CommandError([command, ...args].join(' '), result.code, result.stderr || result.stdout);
  return result.stdout;
}

export async function commandExists(command: string): Promise<boolean> {
  const result = await runCommand('sh', ['-c', `command -v ${command}`]);
  return result.code === 0;
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/**
 * Makes sure the Debian packages behind `tools` are installed, installing the missing ones with apt-get
 * (apt-get update first). Needs root. `say` reports what happens.
 */
export async function ensureDebianTools(tools: Record<string, string>, say: (line: string) => void): Promise<void> {
  const missing: string[] = [];
  for (const [tool, pkg] of Object.entries(tools)) if (!(await commandExists(tool))) missing.push(pkg);
  if (missing.length === 0) return;
  const packages = [...new Set(missing)];
  if (!(await commandExists('apt-get')))
    throw new Error(`missing ${packages.join(', ')} and no apt-get to install them`);
  say(`installing ${packages.join(' ')} (apt-get)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = await runCommand('apt-get', ['update'], { timeoutMs: 300_000, env });
  if (update.code !== 0) throw new CommandError('apt-get update', update.code, update.stderr);
  const install = await runCommand('apt-get', ['install', '-y', '--no-install-recommends', ...packages], {
    timeoutMs: 600_000,
    env,
  });
  if (install.code !== 0) throw new CommandError(`apt-get install ${packages.join(' ')}`, install.code, install.stderr);
}
