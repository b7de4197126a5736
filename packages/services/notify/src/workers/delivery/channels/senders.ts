/** The real channels' sender factories, by channel (in_app is the core's). */
import type { ChannelSenderFactory } from './channel.js';
import { createEmailSender } from './email.js';
import { createPushSender } from './push.js';
import { createSmsSender } from './sms.js';

export const providerSenderFactories: Readonly<Record<'email' | 'push' | 'sms', ChannelSenderFactory>> = {
  email: createEmailSender,
  push: createPushSender,
  sms: createSmsSender,
};
