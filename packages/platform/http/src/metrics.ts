/**
 * The Prometheus primitives live in the Raft library (so that embedders get Raft metrics without this package);
 * every process of every service renders its metrics through them.
 */
export { Counter, Gauge, Histogram, MetricsRegistry } from '@raftkit/raft';
