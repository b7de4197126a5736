/**
 * Clicks: each redirect's click record goes, after the 302 is sent, to the click topic of the replicated event log
 * (hosted by the "clicklog" workers); the "analytics" worker consumes it into LevelDB aggregates served to app
 * servers by fetchStats. See ../../CLICKS.md.
 */
export type { ClickRecord, LinkStats } from './record.js';
export { ClickEmitter } from './emitter.js';
export { countryOf } from './geo.js';
export { clickWorkerRoles } from './roles.js';
export { fetchStats } from './stats-client.js';
export { analyticsReplicas, CLICK_LOG_ROLE, CLICK_LOG_HOSTS, CLICK_TOPIC, clickPartitions } from './click-log.js';
