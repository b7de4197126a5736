export { startCluster, runCli, CLUSTER_CLI } from './cluster.js';
export type { TestCluster, TestWorker, ClusterOptions, CliResult } from './cluster.js';
export { freePort, reservePorts, reserveShiftedPorts } from './ports.js';
export type { PortRange } from './ports.js';
export { call, until, agent } from './http.js';
export type { Answer, CallOptions } from './http.js';
export { checkCommandShapes } from './command-shapes.js';
export type { CommandShapeCheck, ShapeOutcome, ShapedMachine } from './command-shapes.js';
export { inPool } from './pool.js';
