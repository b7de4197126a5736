export { CHANNELS, PRIORITIES } from './channels/channel.js';
export type {
  Channel,
  Priority,
  PushSubscription,
  Address,
  RenderedContent,
  OutboundMessage,
  SendOutcome,
  ChannelSender,
  ReceiptUpdate,
  SenderContext,
  ChannelSenderFactory,
  InAppItem,
} from './channels/channel.js';
export { EmailSender, createEmailSender, type EmailSenderOptions } from './channels/email.js';
export { PushSender, PUSH_BATCH, createPushSender, loadOrCreateVapidKeys, type PushSenderOptions, type VapidKeys } from './channels/push.js';
export { SmsSender, createSmsSender, type SmsSenderOptions } from './channels/sms.js';
export * from './providers/index.js';
export { providerSenderFactories } from './channels/senders.js';
