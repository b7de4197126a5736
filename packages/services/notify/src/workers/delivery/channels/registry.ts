/**
 * The senders of the provider channels, by channel. The delivery worker builds one per channel it runs; a channel
 * without an entry is not served (its queues wait). In-app is built in (channels/in-app.ts): it needs the state
 * groups, not a provider.
 */
import type { Channel, ChannelSenderFactory } from './channel.js';
import { providerSenderFactories } from './senders.js';

export const senderFactories: Partial<Record<Exclude<Channel, 'in_app'>, ChannelSenderFactory>> = {
  ...providerSenderFactories,
};
