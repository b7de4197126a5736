/**
 * @raftkit/video: the video service. Raft members hold the metadata (machine.ts, members/api.ts); worker roles: the
 * object store (store/), the app tier (workers/app/http.ts), the delivery tiers (delivery/), the pipeline and transcode workers.
 * README.md has the contract.
 */
import type { ServiceDefinition } from '@raftkit/http';
import { appRole } from './workers/app/http.js';
import { edgeRole, regionalRole } from './workers/delivery/index.js';
import type { VideoCommand, VideoResult } from './machine.js';
import { videoMembers } from './members/api.js';
import { pipelineRole } from './workers/pipeline/pipeline.js';
import { transcoderRole } from './workers/pipeline/transcoder.js';
import { storeRole } from './workers/store/server.js';

export { VideoMachine, checkVideoCommand, DEFAULT_LIMITS, PRIVACY, taskKey, VIDEO_OPS } from './machine.js';
export type {
  Privacy,
  QualitySpec,
  QualityState,
  SegmentRecord,
  Stage,
  Task,
  Tier,
  Upload,
  UploadStatus,
  Video,
  VideoCommand,
  VideoLimits,
  VideoResult,
  VideoStatus,
} from './machine.js';
export { appRole, startApp, APP_ROLE, PLAYBACK_TTL_S, UPLOAD_URL_TTL_MS } from './workers/app/http.js';
export type { VideoBody } from './workers/app/http.js';
export {
  storeRole,
  startStore,
  STORE_ROLE,
  CHUNK_SIZE,
  MAX_CHUNK_BYTES,
  MAX_UPLOAD_BYTES,
  rawKey,
  parseRange,
} from './workers/store/server.js';
export { DiskStore } from './workers/store/disk.js';
export { signingSecret, signQuery, verifySigned } from './signing.js';
export type { Access, SignedParams, Verdict } from './signing.js';
export { MetaClient, StoreClient } from './internal-client.js';
export { memberRoutes } from './members/api.js';
export { pipelineRole, startPipeline, PIPELINE_ROLE, revisionPrefix } from './workers/pipeline/pipeline.js';
export {
  transcoderRole,
  startTranscoder,
  TRANSCODER_ROLE,
  DEFAULT_LEASE_MS,
  mediaTask,
} from './workers/pipeline/transcoder.js';

/**
 * `cluster up --service video`: the members, then the stores, the delivery tiers (regional before edges), the app
 * tier, the pipeline worker and the transcode pool. The places in the worker block are fixed (regional 2, edges
 * from 3, apps from 6, pipeline 8, transcoders from 9, stores from 11) so the public ports (edges, apps) stay where
 * they were with a single store at place 1.
 */
export const videoService: ServiceDefinition<VideoCommand, VideoResult> = {
  ...videoMembers,
  workers: [
    storeRole,
    { ...regionalRole, slot: 2 },
    { ...edgeRole, slot: 3 },
    { ...appRole, slot: 6 },
    { ...pipelineRole, slot: 8 },
    { ...transcoderRole, slot: 9 },
  ],
};
export { VideoClient } from './client.js';
export type { VideoClientOptions, StartUpload, UploadDestination, UploadAnswer, ChunkDescriptor } from './client.js';
