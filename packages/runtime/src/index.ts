export {
  INSTANCE_ID_PATTERN,
  KEY_ROOT,
  MAX_MODEL_NAME_LENGTH,
  NAME_PATTERN,
  SUBJECT_ROOT,
  cancelSubject,
  electionKey,
  componentName,
  endpointAddress,
  endpointName,
  endpointSubject,
  formatAddress,
  forwardPassStream,
  forwardPassSubject,
  instanceAddress,
  instanceId,
  instanceIdFromLease,
  instanceKey,
  instanceSubject,
  instancesPrefix,
  isInstanceAddress,
  kvEventsStream,
  kvEventsSubject,
  loadStream,
  loadSubject,
  modelKey,
  modelName,
  modelsPrefix,
  namespace,
  namespacePrefix,
  parseKey,
  parseRequestSubject,
  requestFiguresStream,
  requestFiguresSubject,
  plannerDecisionsStream,
  plannerDecisionsSubject,
} from './addressing.js';
export type {
  ComponentName,
  EndpointAddress,
  EndpointName,
  InstanceAddress,
  InstanceId,
  ModelName,
  Namespace,
  ParsedKey,
} from './addressing.js';
export {
  PROTOCOL_VERSION,
  decodeCancelMessage,
  decodeInstanceInfo,
  decodeJson,
  decodeModelCard,
  decodeRequestEnvelope,
  decodeResponseFrame,
  encodeJson,
  BinaryPayload,
  decodeMessage,
  encodeMessage,
} from './protocols.js';
export { BINARY_MESSAGE_FORMAT, MAX_MESSAGE_BLOBS, decodeBinaryMessage, encodeBinaryMessage, isBinaryMessage } from './binary-message.js';
export type {
  CallHomeTarget,
  CancelMessage,
  InstanceInfo,
  JsonValue,
  ModelCard,
  Payload,
  RequestEnvelope,
  ResponseFrame,
  TokenizerSource,
  WireError,
} from './protocols.js';
export { DEFAULT_LEASE_TTL_MS } from './discovery.js';
export type { Discovery, LeaseLostListener, LeaseRestoredListener, WatchEvent } from './discovery.js';
export { DEFAULT_REQUEST_TIMEOUT_MS, NoRespondersError, StreamIncompleteError, isRetriable } from './request-plane.js';
export type { EndpointHandler, RequestContext, RequestOptions, RequestPlane, ServedEndpoint } from './request-plane.js';
export type { EventMessage, EventPlane, SubscribeOptions } from './event-plane.js';
export { MemoryDiscovery, MemoryDiscoveryStore } from './memory-discovery.js';
export type { LeaseState } from './memory-discovery.js';
export { MemoryRequestBroker, MemoryRequestPlane } from './memory-request-plane.js';
export { DEFAULT_KV_PULL_TIMEOUT_MS } from './kv-transfer/kv-transfer-plane.js';
export {
  DEFAULT_KV_CHUNK_BYTES,
  DEFAULT_KV_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_KV_CONNECT_TIMEOUT_MS,
  DEFAULT_KV_IDLE_TIMEOUT_MS,
  DEFAULT_KV_MAX_BLOCK_BYTES,
  DEFAULT_KV_MAX_CONNECTIONS,
  DEFAULT_KV_MAX_HASHES_PER_PULL,
  MAX_KV_LAYOUT_DIGEST_LENGTH,
  MAX_KV_LEASE_ID_LENGTH,
  formatTransferAddress,
  parseTransferAddress,
} from './kv-transfer/kv-transfer-limits.js';
export type { KvTransferOptions } from './kv-transfer/kv-transfer-limits.js';
export { MemoryKvTransferNetwork, MemoryKvTransferPlane } from './kv-transfer/memory-kv-transfer-plane.js';
export { TcpKvTransferPlane } from './kv-transfer/tcp-kv-transfer-plane.js';
export type {
  KvBlockProvider,
  KvPullOptions,
  KvPullRequest,
  KvReleaseRequest,
  KvTransferBlock,
  KvTransferCounters,
  KvTransferPlane,
  KvTransferServeOptions,
  KvTransferServer,
} from './kv-transfer/kv-transfer-plane.js';
export { MemoryEventPlane, MemoryEventStore } from './memory-event-plane.js';
export { EtcdDiscovery } from './etcd-discovery.js';
export { MAX_CANDIDATE_ID_LENGTH, decodeElectionValue } from './leader-election.js';
export type { ElectionValue, LeaderElection, LeadershipChange, LeadershipListener } from './leader-election.js';
export { MemoryElectionStore, MemoryLeaderElection } from './memory-leader-election.js';
export { EtcdLeaderElection, LEADER_FRESHNESS } from './etcd-leader-election.js';
export type { EtcdLeaderElectionOptions } from './etcd-leader-election.js';
export type { EtcdDiscoveryOptions } from './etcd-discovery.js';
export { DEFAULT_STREAM_IDLE_TIMEOUT_MS, NatsRequestPlane } from './nats-request-plane.js';
export type { CallHomeOffer, NatsRequestPlaneConnectOptions, NatsRequestPlaneOptions } from './nats-request-plane.js';
export { CALL_HOME_MAGIC, CALL_HOME_VERSION, CallHomeListener, DEFAULT_CALL_HOME_LIMITS } from './call-home/call-home.js';
export type { CallHomeLimits } from './call-home/call-home.js';
export { DEFAULT_ACK_WAIT_MS, DEFAULT_EVENT_BATCH_SIZE, FIGURES_STREAM_MAX_AGE_MS, JetStreamEventPlane, layoutStreamFor } from './jetstream-event-plane.js';
export type { JetStreamEventPlaneConnectOptions, JetStreamEventPlaneOptions, StreamSpec } from './jetstream-event-plane.js';
export {
  DEFAULT_GC_BUDGET,
  DEFAULT_PRUNE_BUDGET,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
  ROUTING_LAYOUT_VERSION,
  RedisRoutingTable,
  SNAPSHOT_CHUNK,
  STAGING_TTL_MS,
  routingKeyPrefix,
} from './redis-routing-table.js';
export type { RedisRoutingTableOptions } from './redis-routing-table.js';
export { connectRuntime, createDiscovery, createEventPlane, createKvTransferPlane, createRequestPlane, createRoutingTable } from './runtime-factory.js';
export type { Runtime, RuntimeConfig } from './runtime-factory.js';
export {
  DEFAULT_DRAIN_TIMEOUT_MS,
  DEFAULT_KEEP_LOGS,
  DEFAULT_LOCAL_MAX_REPLICAS,
  DEFAULT_MAX_LOG_BYTES,
  DEFAULT_POLL_INTERVAL_MS,
  LOAD_QUERY_TIMEOUT_MS,
  LocalConnector,
  MAX_LOCAL_REPLICAS,
  createLocalConnector,
} from './connectors/local-connector.js';
export type { LocalConnectorOptions, LocalReplica, LocalReplicaState, ReplicaExit } from './connectors/local-connector.js';
export { MAX_TEMPLATE_ARGS, MAX_TEMPLATE_ARG_LENGTH, PORT_PLACEHOLDERS, TEMPLATE_PLACEHOLDERS, parseWorkerTemplate } from './connectors/worker-template.js';
export type { PortPlaceholder, TemplatePlaceholder, WorkerTemplate } from './connectors/worker-template.js';
// The Kubernetes connector is the `@switchyard/runtime/kubernetes` entry: @kubernetes/client-node costs
// ~0.4 s of CPU to import, which only a planner on Kubernetes needs.
