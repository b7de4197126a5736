export { probe, DEFAULT_MAX_DURATION_S, DEFAULT_SOURCE_LIMITS } from './probe.js';
export type { ProbeInfo, ProbeOptions, ProbeRejection, ProbeResult, SourceLimits } from './probe.js';
export {
  LADDER,
  MAX_OUTPUT_FPS,
  PLAYBACK_PER_SOURCE,
  PLAYBACK_SEGMENT_S,
  SOURCE_SEGMENT_S,
  frameSize,
  outputFps,
  planTask,
  planTranscode,
  playbackIndexes,
  qualitiesFor,
  segmentJobs,
  sourceSegments,
  taskId,
} from './plan.js';
export type { PlanInput, Quality, QualityName, Rung, SourceSegment, TranscodePlan, TranscodeTask } from './plan.js';
export {
  INIT_FILE,
  segmentArgs,
  segmentFileName,
  transcodeArgs,
  transcodeSegment,
  transcodeTask,
} from './transcode.js';
export type { PlaybackSegment, TaskOutput, TranscodeOptions } from './transcode.js';
export {
  buildDashMpd,
  buildHlsMaster,
  buildHlsVariant,
  buildSubtitlePlaylist,
  isoDuration,
  measuredBandwidth,
  targetDuration,
} from './manifest.js';
export type { DashVariantInput, SegmentRef, SubtitleInput, VariantInput } from './manifest.js';
export { HlsParseError, parseAttributes, parseHls } from './hls-parse.js';
export type { Attributes, HlsMaster, HlsMedia, HlsMediaSegment, HlsVariant } from './hls-parse.js';
export { DEFAULT_POSTER_PERCENT, THUMBNAIL_PERCENTS, makeThumbnails, thumbnailTimes } from './thumbnails.js';
export type { Thumbnail } from './thumbnails.js';
export {
  buildWebVtt,
  makeCaptions,
  parsePocketsphinx,
  recogniseSpeech,
  vttTime,
  wordsToCues,
  POCKETSPHINX_MODEL_DIR,
} from './captions.js';
export type { Cue, RecognisedWord } from './captions.js';
export { DEFAULT_FLAG_TERMS, DEFAULT_RULES, DEFAULT_TAKE_DOWN_TERMS, moderate, termRule } from './moderation.js';
export type {
  ModerationDecision,
  ModerationInput,
  ModerationResult,
  ModerationRule,
  RuleVerdict,
} from './moderation.js';
export { DEFAULT_SPEECH, makeTestVideo } from './testvideo.js';
export type { TestVideoOptions } from './testvideo.js';
export { runPool } from './pool.js';
export { INPUT_GUARD, run, runOk, ToolError, TOOLS } from './exec.js';
export type { RunOptions, RunResult } from './exec.js';
export { parseFmp4, shiftFragments } from './fmp4.js';
export type { Fmp4Layout, FragmentInfo, TrackInfo } from './fmp4.js';
export { LAYOUT, buildManifestSet } from './layout.js';
export type { ManifestSetInput, QualityRecord } from './layout.js';
