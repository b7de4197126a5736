export * from './rank-wire.js';
export * from './workers/ranker/index.js';
export { createFeedService } from './service.js';
export { PostsMachine, checkPostCommand } from './machine.js';
export type { Post, NewPost, PostCommand, PostResult } from './machine.js';
export { newPostId, postIdTime, POST_ID } from './post-id.js';
export { FeedStore } from './workers/store/store.js';
export type { Profile, FeedEntry, AccountState, Engagement, Edge } from './workers/store/store.js';
export { StoreClient } from './store-client.js';
export { storeRole, STORE_ROLE, STORE_COUNT } from './workers/store/worker.js';
export { fanoutRole, FANOUT_ROLE, FANOUT_COUNT } from './workers/fanout/fanout.js';
export { appRole, APP_ROLE, DEFAULT_LIMIT, MAX_LIMIT } from './workers/app/http.js';
export {
  applyRanking,
  limitConsecutive,
  mergeCandidates,
  encodeToken,
  decodeToken,
  MAX_CONSECUTIVE,
} from './workers/app/assemble.js';
export type { FeedToken } from './workers/app/assemble.js';
export { FeedReader } from './workers/app/feed-reader.js';
export type { FeedPage, PostView } from './workers/app/feed-reader.js';
export { keys, month, readMonths } from './workers/store/keys.js';
export type { PostEvent, DeleteEvent } from './events.js';
export { FeedClient } from './client.js';
export type { FeedClientOptions, PostInput } from './client.js';
