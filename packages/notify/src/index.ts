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
export { createNotifyService, checkNotifyCommand } from './api.js';
export type { IngestRecord, QueuedMessage } from './records.js';
export { NotifyMachine, defaultPreferences, messageId, DEDUP_WINDOW_MS, CAP_WINDOW_MS, INBOX_LIMIT } from './machine.js';
export type { NotifyCommand, NotifyResult, Preferences, QuietHours, DeliveryRow, DeliveryStatus, Template, Outcome } from './machine.js';
export { inQuietHours, localMinutes, isValidTimeZone } from './quiet-hours.js';
export { render, fill } from './template.js';
export { chooseChannels, addressOf, routerRole, startRouter } from './router-worker.js';
export { deliveryRole, startDelivery, parseChain, nextInChain } from './delivery.js';
export { senderFactories } from './channels/registry.js';
export { NotifyClient } from './client.js';
export type { SendInput, StatusAnswer } from './client.js';
export * from './placement.js';
export { EmailSender, createEmailSender, type EmailSenderOptions } from './channels/email.js';
export { PushSender, PUSH_BATCH, createPushSender, loadOrCreateVapidKeys, type PushSenderOptions, type VapidKeys } from './channels/push.js';
export { SmsSender, createSmsSender, type SmsSenderOptions } from './channels/sms.js';
export * from './providers/index.js';
export { providerSenderFactories } from './channels/senders.js';
