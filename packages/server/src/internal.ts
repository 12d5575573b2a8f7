// For sibling packages and tests only; not part of the public surface.
export { PROTO_DIR, PROTO_LOADER_OPTIONS, loadGrpcProtos } from './grpc/protos.js';
export type { GrpcProtos } from './grpc/protos.js';
export { grpcStatusFor, toGrpcError } from './grpc/grpc-status.js';
export { httpStatusFromErrorCode } from './http-status.js';
export { readSharedMemoryInputs, sharedMemoryOutputTargets, useSharedMemory, writeSharedMemoryOutputs } from './shared-memory-io.js';
export type { SharedMemoryTarget, SharedMemoryUse } from './shared-memory-io.js';
export { TritonMetrics } from './metrics/triton-metrics.js';
export { ProcCpuSampler } from './metrics/cpu-stats.js';
export type { CpuMetricsSource } from './metrics/cpu-stats.js';
export { renderPrometheusText } from './metrics/prometheus-text.js';
export { createLimitedHttpServer } from './http/http-limits.js';
export { isMetricsPath } from './metrics/metrics-server.js';
export { matchRoute } from './http/http-router.js';
export type { Route } from './http/http-router.js';
