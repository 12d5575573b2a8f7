// @switchyard/kv-router: the KV-aware router's pure core. The Redis RoutingTable lives in
// @switchyard/runtime (the only package that talks to Redis).
export type {
  ApplyResult,
  WorkerEvents,
  RouteDecision,
  RouteRequest,
  RoutingTable,
  WorkerId,
  WorkerLoad,
  WorkerScore,
} from './routing-table.js';
export {
  DEFAULT_APPROX_TTL_MS,
  DEFAULT_OVERLAP_WEIGHT,
  DEFAULT_RESERVATION_TTL_MS,
  DEFAULT_ROUTER_TEMPERATURE,
  checkEvents,
  checkRouteRequest,
  checkSnapshot,
} from './routing-table.js';
export { chooseCandidate, scoreCandidate, type CandidateState, type ScoringInput } from './selector.js';
export { MemoryRoutingTable } from './memory-routing-table.js';
export { KvIndexer, type IndexerApplyResult, type KvIndexerOptions, type KvIndexerStats } from './kv-indexer.js';
