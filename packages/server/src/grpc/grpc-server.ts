/**
 * The gRPC front door: `inference.GRPCInferenceService` and `grpc.health.v1.Health` on one
 * grpc-js server, wire-compatible with Triton's (default port 8001).
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { silentLogger, type Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { Restrictions } from '../access-control.js';
import type { ServerSettings } from '../settings.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import { adminHandlers } from './admin-handlers.js';
import { restrictedProtocolInterceptor } from './grpc-access.js';
import type { GrpcContext } from './grpc-context.js';
import { healthHandlers, modelHandlers } from './model-handlers.js';
import { modelInferHandler } from './model-infer.js';
import { loadGrpcProtos } from './protos.js';
import { modelStreamInferHandler } from './stream-infer.js';

export const DEFAULT_GRPC_PORT = 8001;
export const DEFAULT_GRPC_HOST = '0.0.0.0';
/** Like Triton's `--exit-timeout-secs` default: how long close() waits for in-flight calls. */
export const DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS = 30_000;

export interface GrpcServerOptions {
  engine: InferenceEngine;
  /** Client system shared memory, shared with the HTTP door. */
  shm: SharedMemoryManager;
  /** Log and trace settings, shared with the HTTP door. */
  settings: ServerSettings;
  /** 0 picks a free port (listen() returns it). */
  port: number;
  /** Default '0.0.0.0' (Triton's `--grpc-address` default). */
  host?: string;
  /**
   * Largest message received or sent, in bytes; -1 (the default) means unlimited. Triton allows
   * INT32_MAX and its clients send tensors far above grpc's 4 MiB default.
   */
  maxMessageBytes?: number;
  /** How long close() lets in-flight calls finish before cancelling them. */
  shutdownTimeoutMs?: number;
  /** `--grpc-restricted-protocol` groups (metadata keys prefixed `triton-grpc-protocol-`); default none. */
  restrictions?: Restrictions;
  logger?: Logger;
}

export interface GrpcFrontDoor {
  /** Bind and start serving; resolves with the bound port. */
  listen(): Promise<number>;
  /** Stop accepting calls, let in-flight ones finish (up to the shutdown timeout), then cancel the rest. */
  close(): Promise<void>;
}

function address(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

export function createGrpcServer(options: GrpcServerOptions): GrpcFrontDoor {
  const host = options.host ?? DEFAULT_GRPC_HOST;
  const maxBytes = options.maxMessageBytes ?? -1;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? DEFAULT_GRPC_SHUTDOWN_TIMEOUT_MS;
  const logger = (options.logger ?? silentLogger).child({ component: 'grpc' });
  const ctx: GrpcContext = { engine: options.engine, shm: options.shm, settings: options.settings, logger };
  const protos = loadGrpcProtos();

  const server = new Server({
    'grpc.max_receive_message_length': maxBytes,
    'grpc.max_send_message_length': maxBytes,
    interceptors: options.restrictions !== undefined && options.restrictions.size > 0 ? [restrictedProtocolInterceptor(options.restrictions)] : [],
  });
  server.addService(protos.inferenceService, {
    ...modelHandlers(ctx),
    ...adminHandlers(ctx),
    ModelInfer: modelInferHandler(ctx),
    ModelStreamInfer: modelStreamInferHandler(ctx),
  });
  server.addService(protos.healthService, healthHandlers(ctx));

  let closing: Promise<void> | undefined;
  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        server.bindAsync(address(host, options.port), ServerCredentials.createInsecure(), (err, port) => {
          if (err !== null) {
            reject(err);
            return;
          }
          logger.info({ port }, 'gRPC server listening');
          resolve(port);
        });
      }),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          logger.warn({ timeoutMs: shutdownTimeoutMs }, 'gRPC calls still running at shutdown timeout; cancelling them');
          server.forceShutdown();
          resolve();
        }, shutdownTimeoutMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return closing;
    },
  };
}
