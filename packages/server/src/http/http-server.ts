/**
 * The KServe v2 / Triton HTTP/REST front door on `node:http`, and beside it the OpenAI API
 * (`/v1/...`, `openai/openai-routes.ts`), whose errors are rendered OpenAI's way.
 *
 * One handler per route (see `http-router.ts` for the table). This file owns the server
 * lifecycle and the request loop: strip the query string, route (404), check the method (405),
 * dispatch, and render any thrown error as `{"error": ...}` with the mapped status.
 *
 * Lifecycle: `listen()` binds (port 0 = ephemeral) and resolves with the bound port. `close()`
 * stops accepting, lets in-flight requests finish, then closes idle keep-alive connections.
 *
 * Limits (`http-limits.ts`): a request too slow to arrive is answered 408 and its connection
 * closed (a slow client cannot hold a connection and a handler); a connection beyond the cap is
 * closed as soon as it is accepted, while the others are served.
 */
import * as http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { type Logger, SwitchyardError, silentLogger, toSwitchyardError } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import { type AccessPolicy, type ApiGroup, OPEN_ACCESS, authorizeHttp, checkHttpRestriction } from '../access-control.js';
import type { ServerSettings } from '../settings.js';
import type { TraceManager } from '../trace/trace-manager.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import { DEFAULT_MAX_BINARY_INPUT_SIZE, DEFAULT_MAX_INPUT_SIZE } from './http-body.js';
import { answerExpectContinue } from './http-continue.js';
import { DEFAULT_HTTP_MAX_CONNECTIONS, createLimitedHttpServer, type HttpLimits } from './http-limits.js';
import { FrontThreads } from '../front-threads/front-host.js';
import { connectionShare } from '../front-threads/front-config.js';
import type { HttpContext } from './http-context.js';
import { CodecThread } from '../codec-thread.js';
import {
  handleHealth,
  handleModelConfig,
  handleModelMetadata,
  handleModelReady,
  handleModelStats,
  handleRepositoryControl,
  handleRepositoryIndex,
  handleServerMetadata,
} from './http-control.js';
import { handleCudaSharedMemory, handleLogging, handleSystemSharedMemory, handleTrace } from './http-extensions.js';
import { handleGenerate, handleInfer } from './http-infer.js';
import { sendError, sendJson } from './http-reply.js';
import type { HeaderForwardPattern } from '../header-forward.js';
import { type Route, allowedMethods, isOpenAiPath, matchRoute, pathOf, versionOf } from './http-router.js';
import { handleOpenAi } from '../openai/openai-routes.js';
import type { OutputParsingConfig } from '@switchyard/llm';
import { sendOpenAiError, sendOpenAiStatus } from '../openai/openai-errors.js';

/** The limits (`http-limits.ts`): header / request timeouts and the connection cap. */
export interface HttpServerOptions extends HttpLimits {
  engine: InferenceEngine;
  shm: SharedMemoryManager;
  settings: ServerSettings;
  /** Request tracing (`--trace-config`), shared with the gRPC door; default none. */
  tracer?: TraceManager;
  /** Port to bind; 0 picks an ephemeral port. Triton's default is 8000. */
  port: number;
  /** Address to bind; default all interfaces. */
  host?: string;
  /**
   * `--http-max-input-size` in bytes (default 64 MiB): the largest request body, before and after
   * decompression; for an infer request using the binary tensor extension, the largest JSON header.
   */
  maxInputSize?: number;
  /** The most binary tensor data after an infer request's JSON header (default `DEFAULT_MAX_BINARY_INPUT_SIZE`, 4 GiB). */
  maxBinaryInputSize?: number;
  /** `--http-restricted-api` groups and `--openai-api-key`; default everything open. */
  access?: AccessPolicy;
  /** `--http-header-forward-pattern`, compiled (`compileHeaderForwardPattern`); default none. */
  headerForwardPattern?: HeaderForwardPattern;
  /**
   * `--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`: chat output parsing of
   * models whose config sets none of theirs (`resolveOutputParsing`); default none.
   */
  outputParsing?: OutputParsingConfig;
  /** The process's own read-only pages beside the APIs (the router's dashboard); default none. */
  appRoutes?: readonly HttpAppRoute[];
  /**
   * `--http-thread-count`: HTTP front threads sharing the port (front-threads/), which serve infer
   * requests themselves and hand every other request to this door on a private Unix socket.
   * 0 / undefined: the door serves every connection on the event loop. Needs `reusePortSupported()`.
   */
  threads?: number;
  logger?: Logger;
}

/**
 * A route of the process's own: one exact path, answered for GET and HEAD only (405 otherwise), after
 * the restriction of `group` (`--http-restricted-api`) is checked like any route's. Looked up only for
 * paths no KServe or OpenAI route matches, so it can never shadow one. The handler owns the response.
 */
export interface HttpAppRoute {
  readonly path: string;
  readonly group: ApiGroup;
  handle(req: http.IncomingMessage, res: http.ServerResponse): void | Promise<void>;
}

export interface HttpFrontDoor {
  /** Start listening; resolves with the bound port. */
  listen(): Promise<number>;
  /** Stop accepting, finish in-flight requests, then close every connection. */
  close(): Promise<void>;
}

export function createHttpServer(options: HttpServerOptions): HttpFrontDoor {
  const ctx: HttpContext = {
    engine: options.engine,
    shm: options.shm,
    settings: options.settings,
    tracer: options.tracer,
    maxInputSize: options.maxInputSize !== undefined && options.maxInputSize > 0 ? options.maxInputSize : DEFAULT_MAX_INPUT_SIZE,
    maxBinaryInputSize: options.maxBinaryInputSize !== undefined && options.maxBinaryInputSize >= 0 ? options.maxBinaryInputSize : DEFAULT_MAX_BINARY_INPUT_SIZE,
    logger: options.logger ?? silentLogger,
    access: options.access ?? OPEN_ACCESS,
    codecThread: new CodecThread(),
    headerForward: options.headerForwardPattern,
    outputParsing: options.outputParsing ?? {},
  };
  const appRoutes = new Map((options.appRoutes ?? []).map((r) => [r.path, r]));
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const server = createLimitedHttpServer(options, (req, res) => {
    inFlight += 1;
    if (closing) res.setHeader('Connection', 'close');
    res.on('close', () => {
      inFlight -= 1;
      if (inFlight === 0) drained?.();
    });
    handle(ctx, appRoutes, req, res).catch((e: unknown) => {
      ctx.logger.error({ err: e }, 'unhandled HTTP handler failure');
      if (!res.headersSent) sendError(res, e);
      else res.destroy();
    });
  }, ctx.logger);
  answerExpectContinue(server, ctx);

  const threads = options.threads ?? 0;
  let fronts: { threads: FrontThreads; dir: string } | undefined;
  const bind = (...args: [number, string | undefined] | [string]) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(...(args as [number, string]), () => {
        server.off('error', reject);
        resolve();
      });
    });
  return {
    listen: async () => {
      if (threads <= 0) {
        await bind(options.port, options.host);
        return (server.address() as AddressInfo).port;
      }
      // The door itself answers the front threads only, on a socket in a directory only this user can enter.
      const dir = await mkdtemp(join(tmpdir(), 'switchyard-http-'));
      const socketPath = join(dir, 'main.sock');
      await bind(socketPath);
      const front = new FrontThreads({
        count: threads,
        door: {
          kind: 'http',
          http: {
            port: options.port,
            ...(options.host !== undefined ? { host: options.host } : {}),
            socketPath,
            limits: threadLimits(options, threads),
            maxInputSize: ctx.maxInputSize,
            maxBinaryInputSize: ctx.maxBinaryInputSize,
            access: ctx.access,
            ...(ctx.headerForward !== undefined ? { headerForwardSource: ctx.headerForward.source } : {}),
          },
        },
        engine: ctx.engine,
        settings: ctx.settings,
        tracer: ctx.tracer,
        logger: ctx.logger,
      });
      fronts = { threads: front, dir };
      try {
        return await front.start();
      } catch (e) {
        await front.close();
        throw e;
      }
    },
    close: async () => {
      closing = true;
      await fronts?.threads.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
      server.closeAllConnections();
      await closed;
      await ctx.codecThread.close();
      if (fronts !== undefined) await rm(fronts.dir, { recursive: true, force: true });
    },
  };
}

/** The door's limits as each of `threads` front threads applies them: the connection cap split between them. */
function threadLimits(limits: HttpLimits, threads: number): HttpLimits {
  const cap = limits.maxConnections ?? DEFAULT_HTTP_MAX_CONNECTIONS;
  return {
    ...(limits.headerTimeoutMs !== undefined ? { headerTimeoutMs: limits.headerTimeoutMs } : {}),
    ...(limits.requestTimeoutMs !== undefined ? { requestTimeoutMs: limits.requestTimeoutMs } : {}),
    maxConnections: connectionShare(cap, threads),
  };
}

async function handle(ctx: HttpContext, appRoutes: ReadonlyMap<string, HttpAppRoute>, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const path = pathOf(req.url);
  const route = matchRoute(path);
  const app = route === undefined ? appRoutes.get(path) : undefined;
  if (app !== undefined) return handleAppRoute(ctx, app, req, res);
  // Credentials first, as Triton checks a restricted API before anything else of the request.
  const refused = authorizeHttp(ctx.access, path, route, req.headers);
  if (refused !== undefined) {
    if (isOpenAiPath(path)) sendOpenAiError(res, refused);
    else sendError(res, refused);
    return;
  }
  if (route === undefined) {
    if (isOpenAiPath(path)) sendOpenAiStatus(res, 404, `no route for ${req.method ?? ''} ${path}`);
    else sendJson(res, 404, JSON.stringify({ error: 'Not Found' }));
    return;
  }
  if (!allowedMethods(route).includes(req.method ?? '')) {
    if (route.kind === 'openai') sendOpenAiStatus(res, 405, `method ${req.method ?? ''} is not allowed on ${path}`);
    else sendJson(res, 405, JSON.stringify({ error: 'Method Not Allowed' }));
    return;
  }
  try {
    await dispatch(ctx, req, res, route);
  } catch (e) {
    // Expected failures are SwitchyardErrors; anything else is a bug worth a warning.
    if (!(e instanceof SwitchyardError)) ctx.logger.warn({ err: e, path }, 'HTTP request failed unexpectedly');
    if (!res.headersSent) sendError(res, toSwitchyardError(e));
    else if (!res.writableEnded) res.end();
  }
}

async function handleAppRoute(ctx: HttpContext, app: HttpAppRoute, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const refused = checkHttpRestriction(ctx.access.http, app.group, (name) => {
    const v = req.headers[name];
    return typeof v === 'string' ? v : undefined;
  });
  if (refused !== undefined) return sendError(res, refused);
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return sendJson(res, 405, JSON.stringify({ error: 'Method Not Allowed' }));
  }
  await app.handle(req, res);
}


async function dispatch(ctx: HttpContext, req: http.IncomingMessage, res: http.ServerResponse, route: Route): Promise<void> {
  switch (route.kind) {
    case 'health':
      return handleHealth(ctx, res, route.which);
    case 'server_metadata':
      return handleServerMetadata(ctx, res);
    case 'stats':
      return handleModelStats(ctx, res, route.model, versionOf(route.version));
    case 'logging':
      return handleLogging(ctx, req, res);
    case 'trace':
      return handleTrace(ctx, req, res, route.model);
    case 'system_shm':
      return handleSystemSharedMemory(ctx, req, res, route.region, route.action);
    case 'cuda_shm':
      return handleCudaSharedMemory(ctx, req, res, route.region, route.action);
    case 'repository_index':
      return handleRepositoryIndex(ctx, req, res, route.repository);
    case 'repository_control':
      return handleRepositoryControl(ctx, req, res, route);
    case 'openai':
      return handleOpenAi(ctx, req, res, route.action, route.model);
    case 'model': {
      const version = versionOf(route.version);
      switch (route.action) {
        case 'metadata':
          return handleModelMetadata(ctx, res, route.model, version);
        case 'ready':
          return handleModelReady(ctx, res, route.model, version);
        case 'config':
          return handleModelConfig(ctx, res, route.model, version);
        case 'stats':
          return handleModelStats(ctx, res, route.model, version);
        case 'infer':
          return handleInfer(ctx, req, res, route.model, version);
        case 'generate':
          return handleGenerate(ctx, req, res, route.model, version, false);
        case 'generate_stream':
          return handleGenerate(ctx, req, res, route.model, version, true);
      }
    }
  }
}
