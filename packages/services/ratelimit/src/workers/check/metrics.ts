/** What a check instance counts, on its /metrics. */
import type { Counter, Histogram, MetricsRegistry } from '@raftkit/http';

export interface CheckMetrics {
  allowed: Counter;
  denied: Counter;
  failOpen: Counter;
  failClosed: Counter;
  overloaded: Counter;
  nearLimit: Counter;
  storeErrors: Counter;
  hotPromotions: Counter;
  hotSyncs: Counter;
  latency: Histogram;
}

export function checkMetrics(registry: MetricsRegistry): CheckMetrics {
  return {
    allowed: registry.counter('ratelimit_checks_allowed_total', 'Checks answered allowed'),
    denied: registry.counter('ratelimit_checks_denied_total', 'Checks answered denied'),
    failOpen: registry.counter(
      'ratelimit_fail_open_total',
      'Rule evaluations allowed because the store did not answer in time (fail-open rules)',
    ),
    failClosed: registry.counter(
      'ratelimit_fail_closed_total',
      'Rule evaluations denied because the store did not answer in time (fail-closed rules)',
    ),
    overloaded: registry.counter(
      'ratelimit_overloaded_total',
      "Checks decided from this instance's local fallback buckets because its queue to the store was full (answered with overloaded: true)",
    ),
    nearLimit: registry.counter(
      'ratelimit_near_limit_total',
      'Rule evaluations that left under 10% of the bucket (denials included), by rule',
    ),
    storeErrors: registry.counter('ratelimit_store_errors_total', 'Store calls that timed out or failed, by store'),
    hotPromotions: registry.counter(
      'ratelimit_hot_key_promotions_total',
      'Counters that started being served from a local hot-key bucket',
    ),
    hotSyncs: registry.counter('ratelimit_hot_key_syncs_total', 'Hot-key debits sent to the store'),
    latency: registry.histogram(
      'ratelimit_check_seconds',
      'Time to decide one check',
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
    ),
  };
}
