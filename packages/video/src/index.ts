export { VideoMachine, checkVideoCommand, DEFAULT_LIMITS, PRIVACY, taskKey, VIDEO_OPS } from './machine.js';
export type { Privacy, QualitySpec, QualityState, SegmentRecord, Stage, Task, Tier, Upload, UploadStatus, Video, VideoCommand, VideoLimits, VideoResult, VideoStatus } from './machine.js';
