/**
 * Builds a standalone worker from options: the engine over the model repositories, and the
 * HTTP, gRPC and metrics front doors over the engine. Owns the order of start-up and drain.
 */
import type { Logger } from '@switchyard/common';
import { createEngine, type Engine } from '@switchyard/engine';
import {
  ServerSettings,
  SharedMemoryManager,
  createGrpcServer,
  createHttpServer,
  createMetricsServer,
} from '@switchyard/server';
import { responseCacheByteSize, type WorkerOptions } from './options.js';
import { levelFor } from './logger.js';

/** The version reported by server metadata: Triton's protocol version this worker follows. */
export const SERVER_VERSION = '2.73.0';

interface FrontDoor {
  listen(): Promise<number>;
  close(): Promise<void>;
}

export interface RunningWorker {
  readonly engine: Engine;
  /** Bound ports (0 when the front door is disabled). */
  readonly ports: { http: number; grpc: number; metrics: number };
  /** Stop accepting, finish in-flight requests (up to the exit timeout), unload models. */
  close(): Promise<void>;
}

export async function startWorker(options: WorkerOptions, logger: Logger & { level?: string }): Promise<RunningWorker> {
  if (options.responseCacheByteSize !== undefined) {
    const size = options.responseCacheByteSize;
    logger.warn(`'--response-cache-byte-size' is deprecated: use the equivalent '--cache-config=local,size=${size}'`);
  }
  const engine = await createEngine({
    modelRepositories: options.modelRepositories,
    controlMode: options.controlMode,
    startupModels: options.startupModels,
    strictModelConfig: options.strictModelConfig,
    pollIntervalSecs: options.repositoryPollSecs,
    responseCacheByteSize: responseCacheByteSize(options),
    serverVersion: SERVER_VERSION,
    logger: logger.child({ component: 'engine' }),
  });

  const settings = new ServerSettings({
    log_verbose_level: options.logVerbose,
    log_format: options.logFormat,
  });
  settings.onLogSettingsChange((s) => {
    if ('level' in logger) logger.level = levelFor(s);
  });
  const shm = new SharedMemoryManager({ enabled: options.allowClientShm });

  const doors: Array<{ name: 'http' | 'grpc' | 'metrics'; door: FrontDoor }> = [];
  if (options.allowHttp) {
    doors.push({
      name: 'http',
      door: createHttpServer({
        engine,
        shm,
        settings,
        port: options.httpPort,
        host: options.httpAddress,
        maxInputSize: options.httpMaxInputSize,
        logger: logger.child({ component: 'http' }),
      }),
    });
  }
  if (options.allowGrpc) {
    doors.push({
      name: 'grpc',
      door: createGrpcServer({
        engine,
        shm,
        settings,
        port: options.grpcPort,
        host: options.grpcAddress,
        maxMessageBytes: options.grpcMaxMessageSize,
        logger: logger.child({ component: 'grpc' }),
      }),
    });
  }
  if (options.allowMetrics) {
    doors.push({
      name: 'metrics',
      door: createMetricsServer({
        engine,
        port: options.metricsPort,
        host: options.metricsAddress,
        logger: logger.child({ component: 'metrics' }),
      }),
    });
  }

  const ports = { http: 0, grpc: 0, metrics: 0 };
  try {
    for (const { name, door } of doors) ports[name] = await door.listen();
  } catch (err) {
    await Promise.allSettled(doors.map(({ door }) => door.close()));
    await engine.shutdown();
    shm.close();
    throw err;
  }
  logger.info({ ports, modelRepositories: options.modelRepositories, controlMode: options.controlMode }, 'worker started');

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info('draining: no new requests, finishing in-flight ones');
      const drain = (async () => {
        // Front doors stop accepting and wait for their in-flight requests; then the engine
        // drains whatever is still queued and releases the models.
        await Promise.allSettled(doors.map(({ door }) => door.close()));
        await engine.shutdown();
      })();
      const timeout = new Promise<'timeout'>((resolve) => {
        const t = setTimeout(() => resolve('timeout'), options.exitTimeoutSecs * 1000);
        t.unref();
      });
      if ((await Promise.race([drain.then(() => 'done' as const), timeout])) === 'timeout') {
        logger.warn({ exitTimeoutSecs: options.exitTimeoutSecs }, 'exit timeout reached with requests still in flight');
      }
      shm.close();
      logger.info('worker stopped');
    })();
    return closing;
  };

  return { engine, ports, close };
}
