// @switchyard/server: the worker's front doors over an InferenceEngine.
export { createHttpServer } from './http/http-server.js';
export { reusePortSupported } from './front-threads/front-host.js';
export { DEFAULT_HTTP_HEADER_TIMEOUT_MS, DEFAULT_HTTP_MAX_CONNECTIONS, DEFAULT_HTTP_REQUEST_TIMEOUT_MS } from './http/http-limits.js';
export type { HttpLimits } from './http/http-limits.js';
export type { HttpAppRoute, HttpFrontDoor, HttpServerOptions } from './http/http-server.js';
export { DEFAULT_SSE_MAX_BUFFERED_BYTES, DEFAULT_SSE_MAX_CLIENTS, SseHub } from './http/sse-hub.js';
export type { SseHubOptions } from './http/sse-hub.js';
export { DEFAULT_MAX_INPUT_SIZE } from './http/http-body.js';
export {
  DEFAULT_GRPC_HOST,
  DEFAULT_GRPC_KEEPALIVE_TIME_MS,
  DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS,
  DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
  DEFAULT_GRPC_MAX_CONNECTIONS,
  DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS,
  DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
  DEFAULT_GRPC_MAX_STREAM_INFLIGHT,
  DEFAULT_GRPC_PORT,
  DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS,
  MAX_GRPC_MESSAGE_BYTES,
  createGrpcServer,
} from './grpc/grpc-server.js';
export type { GrpcFrontDoor, GrpcServerOptions } from './grpc/grpc-server.js';
export { DEFAULT_METRICS_HOST, DEFAULT_METRICS_PORT, createMetricsServer } from './metrics/metrics-server.js';
export type { MetricsFrontDoor, MetricsServerOptions } from './metrics/metrics-server.js';
export { DEFAULT_METRICS_SETTINGS } from './metrics/triton-metrics.js';
export { MAX_FORWARDED_HEADERS, MAX_FORWARDED_NAME_LENGTH, compileHeaderForwardPattern } from './header-forward.js';
export type { HeaderForwardPattern } from './header-forward.js';
export type { CompressionLevel } from './grpc/response-compression.js';
export type { GrpcTls } from './grpc/grpc-server.js';
export type { MetricsSettings } from './metrics/triton-metrics.js';
export { CLIENT_SHM_DISABLED_MESSAGE, DEFAULT_SHM_DIR, SharedMemoryManager } from './shared-memory.js';
export type { SharedMemoryLease } from './shared-memory.js';
export type { SystemShmRegionStatus } from './shared-memory.js';
export { DEFAULT_LOG_SETTINGS, DEFAULT_TRACE_SETTINGS, ServerSettings } from './settings.js';
export type { LogSettings, TraceSettings } from './settings.js';
export { createFrontDoors } from './front-doors.js';
export { REASONING_PARSER_NAMES, TOOL_CALL_PARSER_NAMES, compileOutputParsing, type OutputParsingFlags } from './openai/output-parsing-flags.js';
export { API_GROUPS, GRPC_RESTRICTED_KEY_PREFIX, OPEN_ACCESS, accessPolicy, parseRestrictions } from './access-control.js';
export type { AccessFlags, AccessPolicy, ApiGroup, Restriction, Restrictions } from './access-control.js';
export type { FrontDoorPorts, FrontDoors, FrontDoorsOptions } from './front-doors.js';
export { TraceManager } from './trace/trace-manager.js';
export {
  DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE,
  DEFAULT_BSP_MAX_QUEUE_SIZE,
  DEFAULT_BSP_SCHEDULE_DELAY_MS,
  DEFAULT_OTEL_SERVICE_NAME,
  DEFAULT_OTEL_URL,
  DEFAULT_TRACE_CONFIG,
  initialTraceSettings,
} from './trace/trace-config.js';
export type { OtelTraceConfig, TraceConfig, TraceLevels, TraceMode } from './trace/trace-config.js';
export { checkTraceFilePath } from './trace/triton-trace-file.js';
export { otlpUrl } from './trace/otlp-exporter.js';
export type { ExporterStats } from './trace/otlp-exporter.js';
