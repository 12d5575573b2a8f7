/**
 * Builds a worker from options: the engine over the model repositories, and the HTTP, gRPC and
 * metrics front doors over the engine; in cluster mode (--etcd and --nats) also the runtime roles
 * and a worker node (@switchyard/cluster) that joins the cluster (`cluster-mode.ts`, loaded only in
 * cluster mode). Owns the order of start-up and drain.
 */
import type { WorkerNode } from '@switchyard/cluster';
import { doorLimits, grpcThreads, httpThreads, timestampFormat } from '@switchyard/cli';
import type { Logger } from '@switchyard/common';
import { createEngine, NvidiaSmiProbe, type Engine, type ModelLoadStep } from '@switchyard/engine';
import { configureSharedPreprocessPool } from '@switchyard/llm';
import { readFileSync } from 'node:fs';
import { type FrontDoorPorts, type GrpcTls, ServerSettings, SharedMemoryManager, TraceManager, checkTraceFilePath, createFrontDoors, initialTraceSettings } from '@switchyard/server';
import { DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, accessPolicy, grpcTlsFiles, isClusterMode, openModelControlDoors, outputParsing, responseCacheByteSize, type WorkerOptions } from './options.js';
import { readWorkerEnvironment } from './environment.js';
import { levelFor } from './logger.js';
import { backendCommandLine, headerForwardPatterns, metricsSettings } from './setting-flags.js';
import { renderTraceMetrics, renderWorkerMetrics } from './worker-metrics.js';
import { traceConfigOf } from './trace-options.js';

/** The version reported by server metadata: Triton's protocol version this worker follows. */
export const SERVER_VERSION = '2.73.0';

export interface RunningWorker {
  readonly engine: Engine;
  /** The cluster instance id in cluster mode, else undefined. */
  readonly instanceId: string | undefined;
  /** Bound ports (0 when the front door is disabled). */
  readonly ports: { http: number; grpc: number; metrics: number };
  /** Stop accepting, finish in-flight requests (up to the exit timeout), unload models. */
  close(): Promise<void>;
}

export interface WorkerHooks {
  /**
   * Cluster mode: the etcd lease was lost (etcd unreachable for longer than the lease TTL, or the lease
   * expired). The worker keeps serving; it registers again by itself once etcd answers.
   */
  onLeaseLost?: (cause: Error) => void;
  /** Cluster mode: the KV transfer server listens; `address` is what other workers are told. */
  onKvTransferServing?: (address: string) => void;
  /** Each step of a model version's load as it starts (the engine's `onLoadStep`; load-progress.ts). */
  onLoadStep?: (step: ModelLoadStep) => void;
}

/** The gRPC TLS files read (`--grpc-use-ssl`), or undefined; a file that cannot be read fails the start with its flag, path and reason. */
function readGrpcTls(options: WorkerOptions): GrpcTls | undefined {
  const files = grpcTlsFiles(options);
  if (files === undefined) return undefined;
  const read = (flag: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`cannot read ${flag} '${path}': ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
  return {
    cert: read('--grpc-server-cert', files.cert),
    key: read('--grpc-server-key', files.key),
    ...(files.rootCert !== undefined ? { rootCert: read('--grpc-root-cert', files.rootCert) } : {}),
    mutual: files.mutual,
  };
}

export async function startWorker(options: WorkerOptions, logger: Logger & { level?: string }, hooks: WorkerHooks = {}): Promise<RunningWorker> {
  // before anything is built: a file that cannot be read fails the start with nothing to undo
  const tls = readGrpcTls(options);
  configureSharedPreprocessPool({ threads: options.preprocessThreads, inlineChars: options.preprocessInlineChars });
  if (options.responseCacheByteSize !== undefined) {
    const size = options.responseCacheByteSize;
    logger.warn(`'--response-cache-byte-size' is deprecated: use the equivalent '--cache-config=local,size=${size}'`);
  }
  // The host's GPUs (nvidia-smi, else the driver's /proc entries), as CUDA_VISIBLE_DEVICES shows them:
  // where instance groups go, and the nv_gpu_* figures.
  const gpus = new NvidiaSmiProbe({ visibleDevices: readWorkerEnvironment().cudaVisibleDevices });
  const inventory = await gpus.inventory();
  // The first sample is the zero of nv_energy_consumption ("since the server started").
  if (inventory.devices.length > 0) logger.info({ gpus: inventory.devices, figures: await gpus.sample() }, 'GPUs found');
  else logger.info({ reason: inventory.absence }, 'no GPU: KIND_AUTO instance groups run on the CPU, KIND_GPU ones are refused');
  // Tracing first: a trace file the worker could not write is a start-up error, before models load.
  const trace = traceConfigOf(options);
  for (const warning of trace.warnings) logger.warn(warning);
  if (trace.config.mode === 'triton' && trace.config.file !== '') checkTraceFilePath(trace.config.file);
  if (trace.config.level.length > 0) {
    const { mode, level, rate, count, file, logFrequency, otel } = trace.config;
    logger.info(mode === 'triton' ? { mode, level, rate, count, file, logFrequency } : { mode, level, rate, count, url: otel.url }, 'tracing requests');
  }
  const engine = await createEngine({
    gpus,
    minComputeCapability: options.minSupportedComputeCapability,
    modelRepositories: options.modelRepositories,
    controlMode: options.controlMode,
    startupModels: options.startupModels,
    strictModelConfig: options.strictModelConfig || options.disableAutoCompleteConfig,
    strictReadiness: options.strictReadiness,
    exitOnError: options.exitOnError,
    // tritonserver --exit-on-error=false keeps a server that failed to initialize up, not live
    initFailure: options.exitOnError ? 'throw' : 'not-live',
    ...(options.modelConfigName !== undefined ? { modelConfigName: options.modelConfigName } : {}),
    // tritonserver takes 0 as 1
    modelLoadThreadCount: Math.max(options.modelLoadThreadCount, 1),
    modelLoadRetryCount: options.modelLoadRetryCount,
    backendConfig: backendCommandLine(options),
    serverName: options.serverId,
    pollIntervalSecs: options.repositoryPollSecs,
    responseCacheByteSize: responseCacheByteSize(options),
    kvTransferTtlMs: options.kvTransferTtlSecs * 1000,
    kvTransferGbps: options.kvTransferGbps,
    generationConfig: options.generationConfig,
    serverVersion: SERVER_VERSION,
    logger: logger.child({ component: 'engine' }),
    ...(hooks.onLoadStep !== undefined ? { onLoadStep: hooks.onLoadStep } : {}),
  });

  const settings = new ServerSettings(
    {
      log_file: options.logFile ?? '',
      log_info: options.logInfo,
      log_warning: options.logWarning,
      log_error: options.logError,
      log_verbose_level: options.logVerbose,
      log_format: timestampFormat(options.logFormat),
    },
    initialTraceSettings(trace.config),
  );
  const tracer = new TraceManager(trace.config, settings, logger.child({ component: 'trace' }));
  settings.onLogSettingsChange((s) => {
    if ('level' in logger) logger.level = levelFor(s);
  });
  const shm = new SharedMemoryManager({ enabled: options.allowClientShm });

  // cluster mode: KV moves worker to worker over TCP (disaggregated prefill/decode); standalone: none,
  // and the cluster's modules are not even loaded
  const clusterMode = isClusterMode(options) ? await import('./cluster-mode.js') : undefined;
  const kvTransferPlane = clusterMode === undefined ? undefined : await clusterMode.createKvTransferPlane(clusterMode.runtimeConfig(options, logger));
  const limits = doorLimits(options);
  const extraMetrics: Array<() => string> = [];
  if (clusterMode !== undefined && kvTransferPlane !== undefined) {
    extraMetrics.push(() => renderWorkerMetrics({ kvTransfer: kvTransferPlane.counters(), pinnedBlocks: clusterMode.pinnedKvBlocks(engine) }));
  }
  if (tracer.exporterStats() !== undefined) extraMetrics.push(() => renderTraceMetrics(tracer.exporterStats()!));
  const forward = headerForwardPatterns(options);
  const doors = createFrontDoors({
    engine,
    shm,
    settings,
    tracer,
    logger,
    access: accessPolicy(options),
    ...(options.allowHttp
      ? { http: { port: options.httpPort, host: options.httpAddress, maxInputSize: options.httpMaxInputSize, ...limits.http, ...limits.httpInfer, outputParsing: outputParsing(options), ...(forward.http !== undefined ? { headerForwardPattern: forward.http } : {}), threads: httpThreads(options, logger) } }
      : {}),
    ...(options.allowGrpc
      ? {
          grpc: {
            port: options.grpcPort,
            host: options.grpcAddress,
            ...limits.grpc,
            inferResponseCompression: options.grpcInferResponseCompressionLevel,
            ...(options.grpcMaxConnectionAge ? { maxConnectionAgeMs: options.grpcMaxConnectionAge } : {}),
            ...(options.grpcMaxConnectionAgeGrace ? { maxConnectionAgeGraceMs: options.grpcMaxConnectionAgeGrace } : {}),
            ...(tls !== undefined ? { tls } : {}),
            ...(forward.grpc !== undefined ? { headerForwardPattern: forward.grpc } : {}),
            threads: grpcThreads(options, logger),
          },
        }
      : {}),
    ...(options.allowMetrics
      ? {
          metrics: {
            port: options.metricsPort,
            host: options.metricsAddress,
            cpu: options.allowCpuMetrics,
            cpuIntervalMs: options.metricsIntervalMs,
            settings: metricsSettings(options),
            ...limits.http,
            ...(options.allowGpuMetrics && inventory.devices.length > 0 ? { gpu: gpus } : {}),
            ...(extraMetrics.length > 0 ? { extraMetrics: () => extraMetrics.map((render) => render()).join('') } : {}),
          },
        }
      : {}),
  });

  let ports: FrontDoorPorts;
  let node: WorkerNode | undefined;
  let kvTransferAddress: string | undefined;
  try {
    ports = await doors.listen();
    if (clusterMode !== undefined && kvTransferPlane !== undefined) {
      node = await clusterMode.joinCluster(options, engine, logger, { ...hooks, onKvTransferServing: (address) => ((kvTransferAddress = address), hooks.onKvTransferServing?.(address)) }, kvTransferPlane);
    }
  } catch (err) {
    await kvTransferPlane?.close().catch(() => {});
    await doors.close();
    await engine.shutdown();
    await tracer.close();
    shm.close();
    throw err;
  }
  const cluster =
    node === undefined
      ? undefined
      : { namespace: options.namespace ?? DEFAULT_CLUSTER_NAMESPACE, instanceId: node.instanceId, models: node.models(), role: options.role ?? DEFAULT_WORKER_ROLE, kvTransferAddress };
  logger.info({ ports, modelRepositories: options.modelRepositories, controlMode: options.controlMode, cluster }, 'worker started');
  const openDoors = openModelControlDoors(options);
  if (openDoors.length > 0) {
    logger.warn(
      { doors: openDoors, controlMode: options.controlMode },
      'the model repository API (load, unload, file upload) is open to every client: restrict it with --http-restricted-api=model-repository:<header>=<value> and --grpc-restricted-protocol=model-repository:<key>=<value>',
    );
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info('draining: no new requests, finishing in-flight ones');
      const drain = (async () => {
        // Cluster first: leave discovery so routers stop sending, finish the cluster's in-flight
        // requests. Then the front doors stop accepting and wait for theirs; then the engine drains
        // whatever is still queued and releases the models.
        await node?.drain().catch((err: unknown) => logger.error({ err }, 'cluster drain failed'));
        await doors.close();
        await engine.shutdown();
      })();
      const timeout = new Promise<'timeout'>((resolve) => {
        const t = setTimeout(() => resolve('timeout'), options.exitTimeoutSecs * 1000);
        t.unref();
      });
      if ((await Promise.race([drain.then(() => 'done' as const), timeout])) === 'timeout') {
        logger.warn({ exitTimeoutSecs: options.exitTimeoutSecs }, 'exit timeout reached with requests still in flight');
      }
      // revoke the lease (no-op if the drain did not finish: keys vanish with it), close NATS
      await node?.close();
      // the last traces: spans still queued go to the collector (bounded wait), trace files close
      await tracer.close();
      const exported = tracer.exporterStats();
      if (exported !== undefined) logger.info(exported, 'trace spans exported');
      shm.close();
      logger.info('worker stopped');
    })();
    return closing;
  };

  return { engine, instanceId: node?.instanceId, ports, close };
}
