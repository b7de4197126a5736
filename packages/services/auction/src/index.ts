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
export { createAuctionService, MAX_PENDING_BIDS } from './members/api.js';
export type { AuctionServiceOptions } from './members/api.js';
export { gatewayRole, startGateway, POLL_AFTER_MS } from './workers/gateway/gateway.js';
export { checkoutRole, CheckoutStore, startCheckout } from './workers/checkout/checkout.js';
export type { CheckoutOrder } from './workers/checkout/checkout.js';
export { bidderToken, verifyBidderToken } from './bidder-token.js';
export { Projector, VIEW_HISTORY_LIMIT } from './members/projector.js';
export type { LoggedBid } from './members/projector.js';
export { Channel, SHARD_SIZE } from './workers/gateway/fanout.js';
export { DEFAULT_GROUP_COUNT, groupPlan, locateAuction } from './placement.js';
export { AuctionClient } from './client.js';
export type { AuctionClientOptions, BidRequest, CreateAuctionRequest, Watch } from './client.js';
export type { AuctionBody, BidBody, BidUpdate, AuctionClosed, Push, ServerMessage, SnapshotMessage } from './wire.js';
