export * from './channels/channel.js';
export { EmailSender, type EmailSenderOptions } from './channels/email.js';
export { PushSender, PUSH_BATCH, loadOrCreateVapidKeys, type PushSenderOptions, type VapidKeys } from './channels/push.js';
export { SmsSender, type SmsSenderOptions } from './channels/sms.js';
export * from './providers/index.js';
