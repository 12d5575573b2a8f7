/**
 * FrontDoors: the HTTP, gRPC and metrics doors of one process over one InferenceEngine, opened and
 * closed together — the shape both the worker and the router serve (each door optional).
 *
 * `listen()` binds them in order (http, grpc, metrics) and resolves with the bound ports (0 for a
 * door that is off); if one fails, the ones already bound are closed and the error is rethrown.
 * `close()` stops every door at once: each stops accepting and finishes its in-flight requests.
 */
import type { InferenceEngine } from '@switchyard/engine';
import type { Logger } from '@switchyard/common';
import type { OutputParsingConfig } from '@switchyard/llm';
import { type AccessPolicy, OPEN_ACCESS } from './access-control.js';
import { createGrpcServer } from './grpc/grpc-server.js';
import { createHttpServer, type HttpAppRoute } from './http/http-server.js';
import { createMetricsServer } from './metrics/metrics-server.js';
import type { GpuMetricsSource } from './metrics/triton-metrics.js';
import type { SharedMemoryManager } from './shared-memory.js';
import type { ServerSettings } from './settings.js';
import type { TraceManager } from './trace/trace-manager.js';
import type { MetricsSettings } from './metrics/triton-metrics.js';
import type { HeaderForwardPattern } from './header-forward.js';
import type { CompressionLevel } from './grpc/response-compression.js';
import type { GrpcTls } from './grpc/grpc-server.js';

export interface FrontDoorsOptions {
  readonly engine: InferenceEngine;
  readonly shm: SharedMemoryManager;
  readonly settings: ServerSettings;
  /** Request tracing for both doors; default none. */
  readonly tracer?: TraceManager;
  readonly logger: Logger;
  /** Restricted API groups per door and the OpenAI API key; default everything open. */
  readonly access?: AccessPolicy;
  /** Each door: undefined = off. Limits left out take the door's DEFAULT_* values. */
  readonly http?: {
    readonly port: number;
    readonly host: string;
    readonly maxInputSize: number;
    /** The most binary tensor data after an infer request's JSON header (default `DEFAULT_MAX_BINARY_INPUT_SIZE`). */
    readonly maxBinaryInputSize?: number;
    readonly headerForwardPattern?: HeaderForwardPattern;
    readonly headerTimeoutMs?: number;
    readonly requestTimeoutMs?: number;
    readonly maxConnections?: number;
    /** The OpenAI door's chat output parsing flags (HttpServerOptions.outputParsing). */
    readonly outputParsing?: OutputParsingConfig;
    /** HTTP front threads (HttpServerOptions.threads, `--http-thread-count`); default none. */
    readonly threads?: number;
    /** The process's own pages on the HTTP port (HttpServerOptions.appRoutes: the router's dashboard). */
    readonly appRoutes?: readonly HttpAppRoute[];
  };
  readonly grpc?: {
    readonly port: number;
    readonly host: string;
    readonly maxReceiveMessageBytes?: number;
    readonly maxStreamInflight?: number;
    readonly maxConnections?: number;
    readonly maxConcurrentStreams?: number;
    readonly maxConnectionIdleMs?: number;
    readonly keepaliveTimeMs?: number;
    readonly keepaliveTimeoutMs?: number;
    readonly headerForwardPattern?: HeaderForwardPattern;
    readonly inferResponseCompression?: CompressionLevel;
    readonly maxConnectionAgeMs?: number;
    readonly maxConnectionAgeGraceMs?: number;
    readonly tls?: GrpcTls;
    /** gRPC front threads (GrpcServerOptions.threads, `--grpc-infer-thread-count`); default none. */
    readonly threads?: number;
  };
  readonly metrics?: {
    readonly port: number;
    readonly host: string;
    readonly extraMetrics?: () => string;
    /** The GPUs' figures for `nv_gpu_*` / `nv_energy_consumption`; absent: no GPU families. */
    readonly gpu?: GpuMetricsSource;
    /** false: no nv_cpu_* families (`--allow-cpu-metrics=false`). Default true. */
    readonly cpu?: boolean;
    /** `--metrics-interval-ms`: CPU figures sampled on this period; undefined = at each scrape. */
    readonly cpuIntervalMs?: number;
    readonly settings?: MetricsSettings;
    readonly headerTimeoutMs?: number;
    readonly requestTimeoutMs?: number;
    readonly maxConnections?: number;
  };
}

export interface FrontDoorPorts {
  http: number;
  grpc: number;
  metrics: number;
}

export interface FrontDoors {
  listen(): Promise<FrontDoorPorts>;
  close(): Promise<void>;
}

export function createFrontDoors(o: FrontDoorsOptions): FrontDoors {
  const doors: Array<{ name: keyof FrontDoorPorts; door: { listen(): Promise<number>; close(): Promise<void> } }> = [];
  const access = o.access ?? OPEN_ACCESS;
  if (o.http !== undefined) {
    doors.push({ name: 'http', door: createHttpServer({ ...o.http, engine: o.engine, shm: o.shm, settings: o.settings, ...(o.tracer !== undefined ? { tracer: o.tracer } : {}), access, logger: o.logger.child({ component: 'http' }) }) });
  }
  if (o.grpc !== undefined) {
    doors.push({ name: 'grpc', door: createGrpcServer({ ...o.grpc, engine: o.engine, shm: o.shm, settings: o.settings, ...(o.tracer !== undefined ? { tracer: o.tracer } : {}), restrictions: access.grpc, logger: o.logger }) });
  }
  if (o.metrics !== undefined) {
    const { cpu, ...metrics } = o.metrics;
    doors.push({ name: 'metrics', door: createMetricsServer({ ...metrics, ...(cpu === false ? { cpu: null } : {}), engine: o.engine, logger: o.logger }) });
  }
  const close = async (): Promise<void> => {
    await Promise.allSettled(doors.map(({ door }) => door.close()));
  };
  return {
    async listen() {
      const ports: FrontDoorPorts = { http: 0, grpc: 0, metrics: 0 };
      try {
        for (const { name, door } of doors) ports[name] = await door.listen();
      } catch (err) {
        await close();
        throw err;
      }
      return ports;
    },
    close,
  };
}
