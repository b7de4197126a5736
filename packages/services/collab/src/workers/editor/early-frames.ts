/**
 * Frames a client sends after its join and before its session is ready. The join reads the log and may wait seconds
 * for another worker's lease to run out, and a client may send frames of up to MAX_FRAME_BYTES meanwhile: they are
 * kept in order for the session, but at most MAX_EARLY_BYTES in all, so one socket cannot make a worker hold an
 * unbounded backlog while it waits (the socket is closed instead).
 */
import type { RawData } from 'ws';
import { MAX_FRAME_BYTES } from '../../protocol.js';

/** Two full frames: an editor's edits right after join fit many times over. */
export const MAX_EARLY_BYTES = 2 * MAX_FRAME_BYTES;

export function frameBytes(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

export class EarlyFrames {
  readonly frames: RawData[] = [];
  private bytes = 0;

  constructor(private readonly maxBytes = MAX_EARLY_BYTES) {}

  /** Queues a frame; false, queueing nothing (and dropping what was queued), once the frames would pass the bound. */
  push(data: RawData): boolean {
    this.bytes += frameBytes(data);
    if (this.bytes > this.maxBytes) {
      this.frames.length = 0;
      return false;
    }
    this.frames.push(data);
    return true;
  }
}
