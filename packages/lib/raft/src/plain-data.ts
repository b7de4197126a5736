/**
 * Commands travel as msgpack: what is not plain data would arrive changed on every member (a Map as a plain
 * object, a Date as a string or number, a class instance without its class). Such a command is refused at
 * propose() instead of being silently re-encoded.
 */

const MAX_DEPTH = 512;

/** Where `value` holds something that would not come back as it was, or null when it is plain data. */
export function plainDataProblem(value: unknown, path = 'command', depth = 0): string | null {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'boolean':
    case 'number':
    case 'string':
      return null;
    case 'bigint':
      return `${path} is a bigint (use a number, or a string of digits)`;
    case 'function':
    case 'symbol':
      return `${path} is a ${typeof value}`;
  }
  if (depth >= MAX_DEPTH) return `${path} is nested over ${MAX_DEPTH} levels deep (or refers to itself)`;
  if (value instanceof Uint8Array)
    return value.constructor === Uint8Array || Buffer.isBuffer(value)
      ? null
      : `${path} is a ${value.constructor.name} (use a Uint8Array)`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      // A path is built only on the way into a nested value: every command is checked, and most fields are leaves.
      if (isLeaf(value[i])) continue;
      const problem = plainDataProblem(value[i], `${path}[${i}]`, depth + 1);
      if (problem !== null) return problem;
    }
    return null;
  }
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    const name = (value as object).constructor?.name ?? 'object';
    return `${path} is a ${name}, which would arrive as ${name === 'Map' || name === 'Set' ? 'something else' : 'a plain object or not at all'} (commands must be plain data: objects, arrays, strings, numbers, booleans, null, Uint8Array)`;
  }
  // for-in: no array of keys per object; a plain object's prototype (Object.prototype or null) adds no enumerable key.
  for (const key in value) {
    const field = (value as Record<string, unknown>)[key];
    if (isLeaf(field)) continue;
    const problem = plainDataProblem(field, `${path}.${key}`, depth + 1);
    if (problem !== null) return problem;
  }
  return null;
}

function isLeaf(value: unknown): boolean {
  return (
    value === null ||
    value === undefined ||
    typeof value === 'string' ||
    typeof value === 'number' ||
    typeof value === 'boolean'
  );
}
