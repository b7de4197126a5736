/**
 * What a token can do with one event-log topic on a cluster hosting the log (the log itself, notify, feed): every
 * call of the log's topic API tried with that token on every member given, and the end offset of the partition
 * before and after, read with the operator's token. The services' tests judge the answers (an internal topic
 * refuses a client token everything, and nothing it tried to append is there).
 */
import { call } from './http.js';

export interface TopicAttempt {
  /** "append", "fetch", "offsets", "commit", "describe", "partition": the call tried. */
  call: string;
  member: string;
  status: number;
  code: string | null;
}

export interface TopicAccessReport {
  attempts: TopicAttempt[];
  /** Whether the topic was in the token's GET /v1/topics listing (on the first member). */
  listed: boolean;
  /** The partition's end offset (operator's view, linearizable fetch) before and after the attempts. */
  endBefore: number;
  endAfter: number;
}

const CALLS: ReadonlyArray<{
  call: string;
  method: string;
  path: (topic: string, partition: number) => string;
  body?: unknown;
}> = [
  {
    call: 'append',
    method: 'POST',
    path: (t, p) => `/v1/topics/${t}/partitions/${p}/records`,
    body: { records: [{ key: 'victim', value: '{"forged":true}' }] },
  },
  { call: 'fetch', method: 'GET', path: (t, p) => `/v1/topics/${t}/partitions/${p}/records?offset=0` },
  { call: 'offsets', method: 'GET', path: (t, p) => `/v1/topics/${t}/partitions/${p}/offsets/router` },
  {
    call: 'commit',
    method: 'POST',
    path: (t, p) => `/v1/topics/${t}/partitions/${p}/offsets/router`,
    body: { offset: 0 },
  },
  { call: 'describe', method: 'GET', path: (t) => `/v1/topics/${t}` },
  { call: 'partition', method: 'GET', path: (t, p) => `/v1/topics/${t}/partitions/${p}` },
];

async function endOffset(
  members: readonly string[],
  adminToken: string,
  topic: string,
  partition: number,
): Promise<number> {
  for (const member of members) {
    const a = await call(
      member,
      'GET',
      `/v1/topics/${topic}/partitions/${partition}/records?offset=0&max_records=1&consistency=linearizable`,
      { token: adminToken },
    );
    if (a.status === 200) return a.body.end_offset as number;
  }
  throw new Error(`no member answered the end offset of ${topic}/${partition}`);
}

export async function topicAccess(
  members: readonly string[],
  adminToken: string,
  token: string,
  topic: string,
  partition = 0,
): Promise<TopicAccessReport> {
  const endBefore = await endOffset(members, adminToken, topic, partition);
  const attempts: TopicAttempt[] = [];
  for (const member of members) {
    for (const c of CALLS) {
      const a = await call(member, c.method, c.path(encodeURIComponent(topic), partition), {
        token,
        ...(c.body !== undefined ? { body: c.body } : {}),
      });
      attempts.push({
        call: c.call,
        member,
        status: a.status,
        code: (a.body?.error as { code?: string } | undefined)?.code ?? null,
      });
    }
  }
  const list = await call(members[0]!, 'GET', '/v1/topics', { token });
  const listed = list.status === 200 && (list.body.topics as Array<{ name: string }>).some((x) => x.name === topic);
  return { attempts, listed, endBefore, endAfter: await endOffset(members, adminToken, topic, partition) };
}
