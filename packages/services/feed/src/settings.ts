/** A numeric setting: `cluster up --set key=value` first, then the environment variable, then the default. */
export function settingNumber(settings: Record<string, string>, key: string, env: string, fallback: number): number {
  const text = settings[key] ?? process.env[env];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`setting ${key} must be a non-negative number, not ${text}`);
  return n;
}
