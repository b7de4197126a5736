export { AuctionMachine, checkAuctionCommand, DEFAULT_LIMITS, KEY_FREEING_STATUSES } from './machine.js';
export type {
  AuctionCommand,
  AuctionLimits,
  AuctionResult,
  AuctionState,
  AuctionView,
  BidInput,
  BidResult,
  BidStatus,
  CreateInput,
  Handoff,
  HistoryEntry,
} from './machine.js';
export { createAuctionService, MAX_PENDING_BIDS } from './api.js';
export type { AuctionServiceOptions } from './api.js';
export { gatewayRole, startGateway, POLL_AFTER_MS } from './gateway.js';
export { checkoutRole, CheckoutStore, startCheckout } from './checkout.js';
export type { CheckoutOrder } from './checkout.js';
export { bidderToken, verifyBidderToken } from './bidder-token.js';
export { Projector, VIEW_HISTORY_LIMIT } from './projector.js';
export type { LoggedBid } from './projector.js';
export { Channel, SHARD_SIZE } from './fanout.js';
export { DEFAULT_GROUP_COUNT, groupPlan, locateAuction } from './placement.js';
export { AuctionClient } from './client.js';
export type { AuctionClientOptions, BidRequest, CreateAuctionRequest, Watch } from './client.js';
export type { AuctionBody, BidBody, BidUpdate, AuctionClosed, Push, ServerMessage, SnapshotMessage } from './wire.js';
