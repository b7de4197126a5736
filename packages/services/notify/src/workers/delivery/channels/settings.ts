/** Reading a sender's settings (`cluster up --set key=value`) and finding its stand-in provider among the workers. */
import type { SenderContext } from './channel.js';

export function intSetting(context: SenderContext, key: string, fallback: number): number {
  const raw = context.settings[key];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--set ${key} must be a positive integer, got ${raw}`);
  return n;
}

/** The first worker of `role` (a stand-in provider), or an error naming the setting that would replace it. */
export function providerWorker(
  context: SenderContext,
  role: string,
  setting: string,
): { httpAddress: string; tcpAddress?: string } {
  const w = context.workers.find((x) => x.role === role);
  if (w === undefined) throw new Error(`no ${role} worker in this cluster and no --set ${setting}`);
  return w;
}
