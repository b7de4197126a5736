/**
 * Templates per (event_type, channel): a title and a body with {{variable}} placeholders filled from the event's
 * data (dotted paths reach nested objects; a missing variable renders empty). No logic, no HTML escaping: email
 * bodies are sent as plain text. Without a template, the event type is the title and the data is the body.
 */
import type { RenderedContent } from './workers/delivery/channels/channel.js';
import type { Template } from './machine.js';

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]{1,100})\s*\}\}/g;

/**
 * Path segments that name what every object inherits, not the event's data: a template is refused for them
 * (parseTemplate), and a lookup never follows them (a template stored before that check renders them empty).
 */
export const RESERVED_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** The placeholder paths of a template text that reach past the data (`{{constructor.name}}`), if any. */
export function reservedPaths(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)]
    .map((m) => m[1]!)
    .filter((path) => path.split('.').some((part) => RESERVED_SEGMENTS.has(part)));
}

/** The value at a dotted path of the data: own properties only, so nothing inherited is ever rendered. */
function lookup(data: Record<string, unknown>, path: string): unknown {
  let value: unknown = data;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null || RESERVED_SEGMENTS.has(part) || !Object.hasOwn(value, part))
      return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

export function fill(text: string, data: Record<string, unknown>): string {
  return text.replace(PLACEHOLDER, (_, path: string) => {
    const value = lookup(data, path);
    if (value === undefined || value === null) return '';
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}

export function render(template: Template | null, eventType: string, data: Record<string, unknown>): RenderedContent {
  if (template === null) return { title: eventType, body: JSON.stringify(data), data };
  return { title: fill(template.title, data), body: fill(template.body, data), data };
}
