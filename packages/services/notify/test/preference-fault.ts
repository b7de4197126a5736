/**
 * The preference-store fault of cluster.test.ts, kept out of the service: the test starts its cluster with
 * NODE_OPTIONS importing this module, so every process the cluster CLI launches loads it; in the worker processes
 * (router, delivery) it wraps StateClient.query, the one way they read the preference store. While the file
 * `NOTIFY_PREFERENCE_FAULT` names exists, a preference read (`routeContext`, `sendContext`) throws as an unreachable
 * store would, as a partition from the state groups would; the log and the recording of outcomes stay reachable.
 * `preferenceStore('down' | 'up')` below sets it from the test.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';

/** The queries that read users' preferences (queries.ts). */
const PREFERENCE_QUERIES = new Set(['routeContext', 'sendContext']);

const flag = process.env.NOTIFY_PREFERENCE_FAULT;
// Only the worker processes (cluster/dist/src/worker.js): the CLI and the members are left as they are.
if (flag !== undefined && /[\\/]worker\.js$/.test(process.argv[1] ?? '')) {
  const { StateClient } = await import('../src/state-client.js');
  const query = StateClient.prototype.query;
  StateClient.prototype.query = function (this: InstanceType<typeof StateClient>, ...args: Parameters<typeof query>) {
    if (PREFERENCE_QUERIES.has(args[1].q) && existsSync(flag))
      return Promise.reject(new Error('the preference store is unreachable (test fault)'));
    return query.apply(this, args);
  } as typeof query;
}

/** Cuts every worker of the cluster started with `flagFile` off the preference store, or restores it. */
export function preferenceStore(flagFile: string, state: 'down' | 'up'): void {
  if (state === 'down') writeFileSync(flagFile, 'down\n');
  else rmSync(flagFile, { force: true });
}
