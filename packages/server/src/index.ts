// @switchyard/server: the worker's front doors over an InferenceEngine.
export { createHttpServer } from './http/http-server.js';
export type { HttpFrontDoor, HttpServerOptions } from './http/http-server.js';
export { DEFAULT_MAX_INPUT_SIZE } from './http/http-body.js';
export { DEFAULT_GRPC_HOST, DEFAULT_GRPC_PORT, DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS, createGrpcServer } from './grpc/grpc-server.js';
export type { GrpcFrontDoor, GrpcServerOptions } from './grpc/grpc-server.js';
export { DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT, createMetricsServer } from './metrics/metrics-server.js';
export type { MetricsFrontDoor, MetricsServerOptions } from './metrics/metrics-server.js';
export { CLIENT_SHM_DISABLED_MESSAGE, DEFAULT_SHM_DIR, SharedMemoryManager } from './shared-memory.js';
export type { SystemShmRegionStatus } from './shared-memory.js';
export { DEFAULT_LOG_SETTINGS, DEFAULT_TRACE_SETTINGS, ServerSettings } from './settings.js';
export type { LogSettings, TraceSettings } from './settings.js';
export { createFrontDoors } from './front-doors.js';
export { API_GROUPS, GRPC_RESTRICTED_KEY_PREFIX, OPEN_ACCESS, accessPolicy, parseRestrictions } from './access-control.js';
export type { AccessFlags, AccessPolicy, ApiGroup, Restriction, Restrictions } from './access-control.js';
export type { FrontDoorPorts, FrontDoors, FrontDoorsOptions } from './front-doors.js';
