/**
 * Clicks: each redirect's click record goes, after the 302 is sent, to a durable stream (the "stream" worker); the
 * "analytics" worker consumes it into LevelDB aggregates served to app servers by fetchStats. See ../../CLICKS.md.
 */
export type { ClickRecord, LinkStats } from './record.js';
export { ClickEmitter } from './emitter.js';
export { countryOf } from './geo.js';
export { clickWorkerRoles } from './roles.js';
export { fetchStats } from './stats-client.js';
