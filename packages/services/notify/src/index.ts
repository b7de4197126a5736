export { CHANNELS, PRIORITIES } from './workers/delivery/channels/channel.js';
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
} from './workers/delivery/channels/channel.js';
export { createNotifyService, checkNotifyCommand } from './members/api.js';
export type { IngestRecord, QueuedMessage } from './records.js';
export {
  NotifyMachine,
  defaultPreferences,
  messageId,
  DEDUP_WINDOW_MS,
  CAP_WINDOW_MS,
  INBOX_LIMIT,
} from './machine.js';
export type {
  NotifyCommand,
  NotifyResult,
  Preferences,
  QuietHours,
  DeliveryRow,
  DeliveryStatus,
  Template,
  Outcome,
} from './machine.js';
export { inQuietHours, localMinutes, isValidTimeZone } from './quiet-hours.js';
export { render, fill } from './template.js';
export { chooseChannels, addressOf, routerRole, startRouter } from './workers/router/router.js';
export { deliveryRole, startDelivery, parseChain, nextInChain } from './workers/delivery/delivery.js';
export { senderFactories } from './workers/delivery/channels/registry.js';
export { NotifyClient } from './client.js';
export type { SendInput, StatusAnswer } from './client.js';
export * from './placement.js';
export { EmailSender, createEmailSender, type EmailSenderOptions } from './workers/delivery/channels/email.js';
export {
  PushSender,
  PUSH_BATCH,
  createPushSender,
  loadOrCreateVapidKeys,
  type PushSenderOptions,
  type VapidKeys,
} from './workers/delivery/channels/push.js';
export { SmsSender, createSmsSender, type SmsSenderOptions } from './workers/delivery/channels/sms.js';
export * from './workers/providers/index.js';
export { providerSenderFactories } from './workers/delivery/channels/senders.js';
