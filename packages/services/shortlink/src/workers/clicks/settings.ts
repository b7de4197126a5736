/** Reads a positive integer from `cluster up --set` settings; a malformed value is a startup error naming it. */
export function positiveIntSetting(settings: Record<string, string>, name: string, fallback: number): number {
  const raw = settings[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new RangeError(`setting ${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}
