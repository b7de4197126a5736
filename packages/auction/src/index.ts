export { AuctionMachine, checkAuctionCommand, DEFAULT_LIMITS } from './machine.js';
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
