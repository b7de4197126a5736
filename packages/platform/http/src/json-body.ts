/**
 * The one reader of a JSON request body's text: the router's `json()`, the fast paths that skip the router (flash,
 * ratelimit check) and the handlers that accept an empty body all parse through it, so a client sees one 400 shape.
 */
import { badRequest } from './errors.js';

/** Parses `text` as JSON; 400 `invalid_json` naming the parser's complaint when it is not. */
export function parseJsonBody(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw badRequest('invalid_json', `the body is not valid JSON: ${(e as Error).message}`);
  }
}
