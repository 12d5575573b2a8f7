export * from './protocols.js';
export {
  MAX_WIRE_ADDRESS_LENGTH,
  MAX_WIRE_CONTEXT_TOKENS,
  MAX_WIRE_ID_LENGTH,
  MAX_WIRE_REASON_LENGTH,
  decodeKvLayout,
  decodeTransferAddress,
  decodeLlmCardMetadata,
  decodeTensorCardMetadata,
  decodeWireGenerateOutput,
  decodeWireGenerateRequest,
  decodeWireInferRequest,
  decodeWireInferResponse,
  decodeWireKvEvents,
  decodeWireForwardPass,
  decodeWireHistogram,
  decodeWireLoad,
  decodeWireRequestFigures,
  decodeWirePlannerDecision,
  decodeWireSnapshotChunk,
  decodeWireSnapshotRequest,
  generateOutputFromWire,
  generateOutputToWire,
  generateRequestToWire,
  inferErrorFromWire,
  inferErrorToWire,
  inferRequestFromWire,
  inferRequestToBinary,
  inferRequestToWire,
  inferResponseFromWire,
  inferResponseToBinary,
  inferResponseToWire,
  kvTransferHandle,
  parametersFromWire,
  parametersToWire,
  roleOf,
  tensorFromWire,
  tensorToWire,
  toJson,
} from './wire-codec.js';
export type { GenerateOutputWireExtras, GenerateRequestFields } from './wire-codec.js';
export { DEFAULT_NAMESPACE, KV_LEASE_DRAIN_MS, MODEL_POLL_MS, startWorkerNode } from './worker/worker-node.js';
export { kvLayoutDigest, pinnedKvBlocks } from './worker/kv-provider.js';
export type { WorkerNode, WorkerNodeOptions, WorkerNodeState } from './worker/worker-node.js';
export { MAX_INLINE_TOKENIZER_BYTES, TOKENIZER_FILES } from './worker/model-cards.js';
export { DEFAULT_LOAD_INTERVAL_MS, LOAD_HEARTBEAT_MS } from './worker/load-publisher.js';
export { DEFAULT_FORWARD_PASS_INTERVAL_MS, FORWARD_PASS_MAX_STEPS } from './worker/forward-pass-publisher.js';
export { KV_EVENTS_MIN_INTERVAL_MS } from './worker/kv-publisher.js';
// ---- figures for planners ----
export { ITL_MS_BOUNDS, TOKEN_BOUNDS, TTFT_MS_BOUNDS, addHistogram, geometricBounds } from './figure-histogram.js';
export { DEFAULT_REQUEST_FIGURES_INTERVAL_MS } from './router/request-figures.js';
export {
  DEFAULT_MAX_FORWARD_PASS_SAMPLES,
  DEFAULT_MAX_INSTANCES,
  DEFAULT_MAX_ROUTERS,
  DEFAULT_OBSERVATION_RESYNC_GRACE_MS,
  DEFAULT_STALE_LOAD_MS,
  ObservationAccumulator,
} from './planner/observation-accumulator.js';
export type { ObservationAccumulatorOptions, ObservationCounters } from './planner/observation-accumulator.js';
export { DEFAULT_OBSERVATIONS_READY_TIMEOUT_MS, EventPlaneObservationSource } from './planner/event-plane-observations.js';
export type { EventPlaneObservationCounters, EventPlaneObservationSourceOptions } from './planner/event-plane-observations.js';
// ---- router core ----
export { DEFAULT_ROUTER_MODE, MAX_TIMER_MS, ROUTER_MODES, startRouterCore } from './router/router-core.js';
export { DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS, DEFAULT_DISAGG_MIN_REMOTE_TOKENS, decideDisagg } from './router/disagg-policy.js';
export type { DisaggDecision, DisaggInput, DisaggThresholds, LocalReason } from './router/disagg-policy.js';
export { DEFAULT_PREFILL_TIMEOUT_MS } from './router/disagg-prefill.js';
export type { DisaggOptions } from './router/disagg-prefill.js';
export type { RouterCore, RouterCoreOptions } from './router/router-core.js';
export { CLUSTER_EXTENSIONS, CLUSTER_SERVER_NAME, ClusterEngine, MODEL_CONTROL_UNSUPPORTED } from './router/cluster-engine.js';
export { DEFAULT_MIGRATION_LIMIT, DEFAULT_STALL_PROBE_MS, RoutedLlmEndpoint } from './router/routed-llm-endpoint.js';
export { DEFAULT_PROBE_TIMEOUT_MS } from './router/health-prober.js';
export { DEFAULT_MAX_HELD_REQUESTS, DEFAULT_QUEUE_TIMEOUT_MS, HeldRequests } from './router/held-requests.js';
export type { HeldRequestsOptions } from './router/held-requests.js';
export { ModelRegistry } from './router/model-registry.js';
export type { LlmTextTools, ModelEntry, RegistryChange, RegistryListener } from './router/model-registry.js';
export { DEFAULT_INHIBIT_MS } from './router/instance-tracker.js';
export { DASHBOARD_DEFAULTS, DashboardState, RingBuffer, histogramQuantile } from './router/dashboard-state.js';
export type {
  DashboardDecision,
  DashboardDisagg,
  DashboardPlannerDecision,
  DashboardPoint,
  DashboardSnapshot,
  DashboardStateOptions,
  DashboardWorker,
  DashboardWorkerEvent,
} from './router/dashboard-state.js';
export { DashboardFeed } from './router/dashboard-feed.js';
export { KV_TRANSFER_BUCKETS_S } from './router/router-stats.js';
/** The `--generation-config` modes of workers and routers (the LLM package's, re-exported for the apps). */
export { DEFAULT_GENERATION_CONFIG_MODE, GENERATION_CONFIG_MODES, type GenerationConfigMode } from '@switchyard/llm';
export type { DisaggLocalReason, DisaggModelStats, DisaggPath, KvEventStats, MigrationKind, RouterMode, RouterStats, WorkerStats } from './router/router-stats.js';
