/**
 * Pre-population of one video, as the app tier asks it: every object of the video's current revision (the HLS
 * master, which leads to variants, init sections, segments and the subtitle playlist; plus the .mpd, thumbnails
 * and captions, which no playlist names) pushed through the regional tier to every edge. The regional tier does
 * the work (tier.ts prefill); this is the call and the key list.
 */
import { HttpError } from '@raftkit/http';

export interface VideoObjects {
  manifest_path: string;
  thumbnails: readonly string[];
  captions_path: string | null;
}

/** The prefill body for a video: its master to walk, and the objects outside the playlists. */
export function videoPrefillBody(v: VideoObjects): { manifest: string; keys: string[] } {
  const keys = [v.manifest_path.replace(/master\.m3u8$/, 'manifest.mpd'), ...v.thumbnails];
  if (v.captions_path !== null) keys.push(v.captions_path);
  return { manifest: v.manifest_path, keys: [...new Set(keys.filter((k) => k !== v.manifest_path))] };
}

/** POSTs the prefill to the regional tier (cluster token) and returns its answer; 502 when it cannot. */
export async function prefillVideo(
  regionalUrl: string,
  token: string,
  v: VideoObjects,
): Promise<Record<string, unknown>> {
  let r: Response;
  try {
    r = await fetch(`${regionalUrl}/api/delivery/prefill`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(videoPrefillBody(v)),
      signal: AbortSignal.timeout(300_000),
    });
  } catch (e) {
    throw new HttpError(
      502,
      'upstream_unavailable',
      `the regional cache could not be reached: ${(e as Error).message}`,
    );
  }
  const answer = (await r.json().catch(() => null)) as Record<string, unknown> | null;
  if (!r.ok || answer === null)
    throw new HttpError(502, 'upstream_error', `the regional cache answered ${r.status} to the prefill`, {
      upstream_status: r.status,
    });
  return answer;
}

/**
 * Purges a whole video from the regional tier and, through it, every edge (a take-down or a flag: nothing of it
 * may be served a moment longer). True when the regional tier and every edge it fanned out to answered; false
 * otherwise, and then the tiers' published check refuses the video within its record TTL anyway.
 */
export async function purgeVideo(regionalUrl: string, token: string, videoId: string): Promise<boolean> {
  try {
    const r = await fetch(`${regionalUrl}/api/delivery/purge`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ video_id: videoId }),
      signal: AbortSignal.timeout(10_000),
    });
    const answer = (await r.json().catch(() => null)) as { downstream?: Array<{ error?: unknown }> } | null;
    return r.ok && answer !== null && (answer.downstream ?? []).every((d) => d.error === undefined);
  } catch {
    return false;
  }
}
