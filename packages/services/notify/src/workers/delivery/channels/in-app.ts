/**
 * The in-app channel: the item is stored in the user's notification centre (replicated, in the user's state group)
 * and pushed over WebSocket to the user's clients connected to this worker. The store is the provider: an item
 * is `delivered` once committed; the WebSocket push is best effort on top (a client that reconnects reads the
 * inbox, so nothing is lost when it was offline).
 */
import type { ChannelSender, InAppItem, OutboundMessage, SendOutcome } from './channel.js';
import { groupOf } from '../../../placement.js';
import type { StateClient } from '../../../state-client.js';

export function inAppSender(state: StateClient, push: (item: InAppItem) => void): ChannelSender {
  return {
    channel: 'in_app',
    maxBatch: 200,
    ratePerSecond: 5_000,
    async send(batch: readonly OutboundMessage[]): Promise<SendOutcome[]> {
      return Promise.all(
        batch.map(async (m): Promise<SendOutcome> => {
          const item: InAppItem = {
            item_id: m.message_id,
            notification_id: m.notification_id,
            user_id: m.user_id,
            event_type: m.event_type,
            priority: m.priority,
            title: m.content.title,
            body: m.content.body,
            data: m.content.data,
            created_at: Date.now(),
            read: false,
          };
          try {
            const result = await state.command(groupOf('user', m.user_id), { op: 'inboxAdd', item });
            const stored = result.op === 'inboxAdd' ? result.item : item;
            if (result.op === 'inboxAdd' && result.added) push(stored);
            return { kind: 'delivered', provider_message_id: stored.item_id, delivered_at: stored.created_at };
          } catch (e) {
            return { kind: 'retry', reason: `notification centre unavailable: ${String((e as Error).message)}` };
          }
        }),
      );
    },
  };
}
