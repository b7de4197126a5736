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
