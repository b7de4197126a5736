/**
 * A typed client of the video service's app tier, and the uploader's side of the byte path: chunks go to the
 * object store by the signed destination the app tier hands out (never through the app tier), each with its sha256
 * so the store acknowledges what it verified; a retried upload (same idempotency key) sends only the chunks the
 * store does not already hold. On ClusterClient (packages/platform/http) for the app tier's calls.
 */
import { createHash } from 'node:crypto';
import { ClusterClient, ServiceError } from '@raftkit/http';
import type { VideoBody } from './workers/app/http.js';
import type { Privacy } from './machine.js';

export interface VideoClientOptions {
  /** App tier base URLs, e.g. http://127.0.0.1:8641 */
  endpoints: string[];
  /** A user's token (`client.<user>...`) or the cluster token. */
  token: string;
  timeoutMs?: number;
}

export interface StartUpload {
  user_id: string;
  title: string;
  description?: string;
  tags?: string[];
  privacy?: Privacy;
  total_size?: number;
  idempotency_key: string;
}

/** The signed upload destination (packages/services/video/README.md, "The signed upload destination"). */
export interface UploadDestination {
  method: 'PUT';
  /** `{index}` stands for the chunk's index. */
  url: string;
  chunks_url: string;
  tus_url: string;
  chunk_size: number;
  max_chunks: number;
  max_size: number;
  checksum_header: string;
  expires_at: string;
}

export interface ChunkDescriptor {
  index: number;
  size: number;
  sha256: string;
}

export interface UploadAnswer {
  upload_id: string;
  status: string;
  video_id: string | null;
  created: boolean;
  chunk_ack: { received: ChunkDescriptor[]; received_bytes?: number; finalized?: boolean };
  upload: UploadDestination;
}

export class VideoClient {
  private readonly cluster: ClusterClient;

  constructor(options: VideoClientOptions) {
    this.cluster = new ClusterClient({
      endpoints: options.endpoints,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 30_000,
    });
  }

  startUpload(input: StartUpload): Promise<UploadAnswer> {
    return this.call('POST', '/api/videos/upload', input);
  }

  /** PUTs one chunk to the store by the signed URL, with its sha256; the store's per-chunk acknowledgement. */
  async putChunk(
    destination: UploadDestination,
    index: number,
    bytes: Uint8Array,
  ): Promise<ChunkDescriptor & { replaced: boolean }> {
    const res = await fetch(destination.url.replace('{index}', String(index)), {
      method: 'PUT',
      body: bytes,
      headers: { [destination.checksum_header]: sha256(bytes) },
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    const body = text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {};
    if (res.status !== 200) {
      const err = (body as { error?: { code?: string; message?: string } }).error;
      throw new ServiceError(
        res.status,
        err?.code ?? 'unknown',
        err?.message ?? `chunk ${index}: HTTP ${res.status}`,
        body,
      );
    }
    return body as unknown as ChunkDescriptor & { replaced: boolean };
  }

  finalize(
    uploadId: string,
    totalChunks: number,
    checksum: string,
  ): Promise<{ video_id: string; status: string; upload_id: string; size: number; checksum: string }> {
    return this.call('POST', `/api/videos/${encodeURIComponent(uploadId)}/finalize`, {
      total_chunks: totalChunks,
      checksum,
    });
  }

  /**
   * Uploads a whole file and finalizes it: the video id. Resumable: called again with the same idempotency key
   * after a failure, it sends only the chunks the store does not hold with the same size and sha256.
   */
  async upload(bytes: Uint8Array, meta: StartUpload): Promise<{ video_id: string; sent: number[] }> {
    const started = await this.startUpload({ ...meta, total_size: bytes.length });
    if (started.chunk_ack.finalized === true && started.video_id !== null)
      return { video_id: started.video_id, sent: [] };
    const size = started.upload.chunk_size;
    const count = Math.max(1, Math.ceil(bytes.length / size));
    const held = new Map(started.chunk_ack.received.map((c) => [c.index, c]));
    const sent: number[] = [];
    for (let i = 0; i < count; i++) {
      const chunk = bytes.subarray(i * size, Math.min(bytes.length, (i + 1) * size));
      const have = held.get(i);
      if (have !== undefined && have.size === chunk.length && have.sha256 === sha256(chunk)) continue;
      await this.putChunk(started.upload, i, chunk);
      sent.push(i);
    }
    const done = await this.finalize(started.upload_id, count, sha256(bytes));
    return { video_id: done.video_id, sent };
  }

  video(videoId: string): Promise<VideoBody> {
    return this.call('GET', `/api/videos/${encodeURIComponent(videoId)}`);
  }

  /** A manifest URL (never a media URL, never a chosen quality) and how long it may be reused. */
  playback(videoId: string): Promise<{ manifest_url: string; ttl_seconds: number }> {
    return this.call('GET', `/api/videos/${encodeURIComponent(videoId)}/playback`);
  }

  library(
    userId: string,
    options: { limit?: number; cursor?: string | null } = {},
  ): Promise<{ videos: VideoBody[]; next_cursor: string | null }> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor !== undefined && options.cursor !== null) query.set('cursor', options.cursor);
    const q = query.toString();
    return this.call('GET', `/api/users/${encodeURIComponent(userId)}/library${q.length > 0 ? `?${q}` : ''}`);
  }

  /** Makes thumbnail `index` (0-4) the poster (the uploader only). */
  choosePoster(videoId: string, index: number): Promise<VideoBody> {
    return this.call('PUT', `/api/videos/${encodeURIComponent(videoId)}/poster`, { index });
  }

  reencode(videoId: string): Promise<VideoBody & { revision: number }> {
    return this.call('POST', `/api/videos/${encodeURIComponent(videoId)}/reencode`);
  }

  close(): Promise<void> {
    return this.cluster.close();
  }

  private async call<T>(method: string, path: string, body?: object): Promise<T> {
    return (await this.cluster.call(method, path, body)) as T;
  }
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
