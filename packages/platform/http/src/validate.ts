/** Validation of request input: each failure is a 400 naming the field. */
import { badRequest } from './errors.js';

export type JsonObject = Record<string, unknown>;

export function requireObject(value: unknown, what = 'body'): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badRequest('invalid_body', `${what} must be a JSON object`, { field: what });
  }
  return value as JsonObject;
}

/** A UTF-16 surrogate without its partner: JSON can carry one ("\\ud800"), UTF-8 cannot, so it would not round-trip. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** `value` as text that survives UTF-8 storage unchanged; 400 naming the field when it holds a lone surrogate. */
export function requireWellFormed(value: string, field: string): string {
  if (LONE_SURROGATE.test(value)) {
    throw badRequest(
      'invalid_field',
      `${field} is not valid Unicode text (it holds a lone surrogate, which cannot be stored as UTF-8)`,
      { field },
    );
  }
  return value;
}

export function requireString(
  obj: JsonObject,
  field: string,
  opts: { minLength?: number; maxLength?: number; pattern?: RegExp } = {},
): string {
  const v = obj[field];
  if (typeof v !== 'string') throw badRequest('invalid_field', `${field} must be a string`, { field });
  requireWellFormed(v, field);
  const bytes = Buffer.byteLength(v);
  if (opts.minLength !== undefined && bytes < opts.minLength) {
    throw badRequest('invalid_field', `${field} must be at least ${opts.minLength} bytes`, { field });
  }
  if (opts.maxLength !== undefined && bytes > opts.maxLength) {
    throw badRequest('invalid_field', `${field} must be at most ${opts.maxLength} bytes`, { field });
  }
  if (opts.pattern !== undefined && !opts.pattern.test(v)) {
    throw badRequest('invalid_field', `${field} has characters outside ${opts.pattern.source}`, { field });
  }
  return v;
}

export function optionalBoolean(obj: JsonObject, field: string, fallback: boolean): boolean {
  const v = obj[field];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw badRequest('invalid_field', `${field} must be true or false`, { field });
  return v;
}

export function requireInteger(obj: JsonObject, field: string, opts: { min?: number; max?: number } = {}): number {
  const v = obj[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw badRequest('invalid_field', `${field} must be an integer`, { field });
  }
  if (opts.min !== undefined && v < opts.min)
    throw badRequest('invalid_field', `${field} must be >= ${opts.min}`, { field });
  if (opts.max !== undefined && v > opts.max)
    throw badRequest('invalid_field', `${field} must be <= ${opts.max}`, { field });
  return v;
}
