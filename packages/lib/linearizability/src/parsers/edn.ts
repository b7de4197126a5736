/**
 * Just enough EDN to read one Jepsen history map per line, such as
 * `{:process 0, :type :ok, :f :get, :key "3", :value "x 0 1 y"}`:
 * a map from keywords to scalars (keyword, string, integer, nil, boolean) or
 * vectors of them. Commas are whitespace, as in EDN.
 */

/** A keyword is kept as its name, tagged so it cannot be confused with a string. */
import { ParseError } from './parse-error.js';

export interface EdnKeyword {
  readonly keyword: string;
}

export type EdnValue = EdnKeyword | string | number | boolean | null | readonly EdnValue[];

export function isKeyword(value: EdnValue | undefined, name?: string): value is EdnKeyword {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    'keyword' in value &&
    (name === undefined || value.keyword === name)
  );
}

/** Parses `{:k v, ...}` into a map keyed by keyword name. Throws an Error describing the first problem. */
export function parseEdnMap(text: string): Map<string, EdnValue> {
  const reader = new Reader(text);
  reader.skipSpace();
  reader.expect('{');
  const map = new Map<string, EdnValue>();
  for (;;) {
    reader.skipSpace();
    if (reader.peek() === '}') break;
    const key = reader.value();
    if (!isKeyword(key)) throw new Error(`map key at column ${reader.column} is not a keyword`);
    reader.skipSpace();
    map.set(key.keyword, reader.value());
  }
  reader.expect('}');
  reader.skipSpace();
  if (!reader.atEnd()) throw new Error(`unexpected text after the map at column ${reader.column}`);
  return map;
}

const DELIMITERS = new Set([' ', '\t', ',', '\r', '\n', '}', ']', '{', '[', '"']);

class Reader {
  private position = 0;

  constructor(private readonly text: string) {}

  get column(): number {
    return this.position + 1;
  }

  atEnd(): boolean {
    return this.position >= this.text.length;
  }

  peek(): string | undefined {
    return this.text[this.position];
  }

  expect(char: string): void {
    if (this.peek() !== char) throw new Error(`expected '${char}' at column ${this.column}`);
    this.position++;
  }

  skipSpace(): void {
    while (!this.atEnd() && ' \t\r\n,'.includes(this.peek()!)) this.position++;
  }

  value(): EdnValue {
    const char = this.peek();
    if (char === undefined) throw new Error('unexpected end of line');
    if (char === '"') return this.string();
    if (char === '[') return this.vector();
    const token = this.token();
    if (token.startsWith(':') && token.length > 1) return { keyword: token.slice(1) };
    if (token === 'nil') return null;
    if (token === 'true') return true;
    if (token === 'false') return false;
    if (/^[-+]?\d+$/.test(token)) return Number(token);
    throw new Error(`unsupported token '${token}' at column ${this.column - token.length}`);
  }

  private token(): string {
    const start = this.position;
    while (!this.atEnd() && !DELIMITERS.has(this.peek()!)) this.position++;
    if (start === this.position) throw new Error(`unexpected '${this.peek()}' at column ${this.column}`);
    return this.text.slice(start, this.position);
  }

  private vector(): EdnValue[] {
    this.expect('[');
    const items: EdnValue[] = [];
    for (;;) {
      this.skipSpace();
      if (this.peek() === ']') break;
      items.push(this.value());
    }
    this.expect(']');
    return items;
  }

  private string(): string {
    this.expect('"');
    let result = '';
    for (;;) {
      const char = this.peek();
      if (char === undefined) throw new Error('unterminated string');
      this.position++;
      if (char === '"') return result;
      if (char !== '\\') {
        result += char;
        continue;
      }
      const escaped = this.peek();
      this.position++;
      const unescaped = escaped === undefined ? undefined : ESCAPES[escaped];
      if (unescaped === undefined)
        throw new Error(`unsupported escape '\\${escaped ?? ''}' at column ${this.column - 1}`);
      result += unescaped;
    }
  }
}

const ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', n: '\n', t: '\t', r: '\r' };

/**
 * Visit each non-empty line of `text` as an EDN map (one history event a line), with its 0-based line index;
 * `fail` throws a ParseError that names the line. Lines that are not an EDN map fail the same way.
 */
export function forEachEdnLine(
  text: string,
  visit: (fields: Map<string, EdnValue>, fail: (reason: string) => never, index: number) => void,
): void {
  text.split('\n').forEach((rawLine, index) => {
    const line = rawLine.trim();
    if (line === '') return;
    const fail = (reason: string): never => {
      throw new ParseError(index + 1, line, reason);
    };
    let fields: Map<string, EdnValue>;
    try {
      fields = parseEdnMap(line);
    } catch (error) {
      return fail((error as Error).message);
    }
    visit(fields, fail, index);
  });
}
