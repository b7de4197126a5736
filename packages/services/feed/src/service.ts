/**
 * The feed service as `cluster up --service feed` runs it: Raft members hosting the event log's partitions and the
 * post groups (one set of processes), then the workers in dependency order: store partitions, fan-out workers, the
 * ranker, the app tier (the public /api).
 */
import { combineServices, type ServiceDefinition } from '@raftkit/http';
import { createLogService } from '@raftkit/log';
import { appRole } from './workers/app/http.js';
import { fanoutRole } from './workers/fanout/fanout.js';
import { feedMemberPart } from './members/api.js';
import { rankerRole } from './workers/ranker/index.js';
import { storeRole } from './workers/store/worker.js';

export function createFeedService(): ServiceDefinition {
  const part: ServiceDefinition = { ...feedMemberPart(), workers: [storeRole, fanoutRole, rankerRole, appRole] };
  // The log's topics here are the feed's queues (posts, deletes, engagement...): internal, no client token uses them.
  return combineServices('feed', [createLogService({ defaultAccess: 'internal' }), part]);
}
