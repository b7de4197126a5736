/** A typed client of the notification service's public endpoints (members), for internal services and tests. */
import { Agent, request } from 'undici';
import { ServiceError } from '@raftkit/http';
import type { Channel, InAppItem, Priority } from './workers/delivery/channels/channel.js';
import type { Preferences } from './machine.js';

export interface SendInput {
  event_type: string;
  user_ids?: string[];
  segment_id?: string;
  data?: Record<string, unknown>;
  priority: Priority;
  idempotency_key: string;
  campaign_id?: string;
}

export interface StatusAnswer {
  notification_id: string;
  users_routed: number;
  channels: Array<{
    channel: Channel;
    status: string;
    delivered_at: number | null;
    user_id: string;
    attempt_count: number;
    provider_message_id: string | null;
    reason: string | null;
    fallback_from: Channel | null;
  }>;
  suppressed: Array<{ user_id: string; channel: Channel; reason: string }>;
}

export class NotifyClient {
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });
  private next = 0;

  constructor(private readonly options: { endpoints: string[]; token: string; timeoutMs?: number }) {}

  /** One call, tried on each member in turn while they answer 503 or do not answer. */
  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    token = this.options.token,
  ): Promise<{ status: number; body: T }> {
    const deadline = Date.now() + (this.options.timeoutMs ?? 15_000);
    let last: unknown = null;
    while (Date.now() < deadline) {
      const base = this.options.endpoints[this.next++ % this.options.endpoints.length]!;
      try {
        const res = await request(base + path, {
          method: method as 'GET',
          dispatcher: this.agent,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
        const parsed = (await res.body.json().catch(() => null)) as T;
        if (res.statusCode === 503) {
          last = parsed;
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        if (res.statusCode >= 400) {
          const err = (parsed as { error?: { code?: string; message?: string } } | null)?.error;
          throw new ServiceError(
            res.statusCode,
            err?.code ?? 'unknown',
            err?.message ?? `HTTP ${res.statusCode}`,
            parsed,
          );
        }
        return { status: res.statusCode, body: parsed };
      } catch (e) {
        if (e instanceof ServiceError) throw e;
        last = e;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    throw new ServiceError(503, 'unavailable', `no member answered: ${JSON.stringify(last)?.slice(0, 200)}`, last);
  }

  async send(input: SendInput): Promise<{ notification_id: string; status: 'accepted'; duplicate?: boolean }> {
    return (await this.call<{ notification_id: string; status: 'accepted' }>('POST', '/v1/notifications', input)).body;
  }

  async status(id: string): Promise<StatusAnswer> {
    return (await this.call<StatusAnswer>('GET', `/v1/notifications/${encodeURIComponent(id)}/status`)).body;
  }

  async preferences(userId: string, token?: string): Promise<Preferences & { user_id: string }> {
    return (
      await this.call<Preferences & { user_id: string }>(
        'GET',
        `/v1/users/${encodeURIComponent(userId)}/preferences`,
        undefined,
        token,
      )
    ).body;
  }

  async setPreferences(
    userId: string,
    change: Record<string, unknown>,
    token?: string,
  ): Promise<Preferences & { user_id: string }> {
    return (
      await this.call<Preferences & { user_id: string }>(
        'PUT',
        `/v1/users/${encodeURIComponent(userId)}/preferences`,
        change,
        token,
      )
    ).body;
  }

  async putSegment(id: string, userIds: string[]): Promise<void> {
    await this.call('PUT', `/v1/segments/${encodeURIComponent(id)}`, { user_ids: userIds });
  }

  async putTemplate(eventType: string, channel: Channel, template: { title: string; body: string }): Promise<void> {
    await this.call('PUT', `/v1/templates/${encodeURIComponent(eventType)}/${channel}`, template);
  }

  async inbox(
    userId: string,
    options: { token?: string; unread?: boolean } = {},
  ): Promise<{ items: InAppItem[]; unread: number }> {
    return (
      await this.call<{ items: InAppItem[]; unread: number }>(
        'GET',
        `/v1/users/${encodeURIComponent(userId)}/inbox${options.unread === true ? '?unread=true' : ''}`,
        undefined,
        options.token,
      )
    ).body;
  }

  async markRead(userId: string, itemIds: string[] | 'all', token?: string): Promise<number> {
    const body = itemIds === 'all' ? { all: true } : { item_ids: itemIds };
    return (
      await this.call<{ marked: number }>('POST', `/v1/users/${encodeURIComponent(userId)}/inbox/read`, body, token)
    ).body.marked;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}
