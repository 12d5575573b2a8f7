/**
 * The HTTP door of a front thread (`--http-thread-count`): a node:http server on the door's port
 * (SO_REUSEPORT: the kernel spreads connections over the threads), with the door's limits. It serves
 * the hot route itself — `POST /v2/models/{m}[/versions/{v}]/infer` for a model the state lists
 * (front-state.ts): body, decode, header forwarding, then the request goes to the main thread's
 * engine and the answer comes back to be encoded, compressed and sent here — and hands every other
 * request, and every infer request it cannot finish alone (shared memory, classification, raw binary
 * bodies, compressed bodies), to the main thread's door (front-proxy.ts), whose handlers answer as
 * without threads.
 *
 * The steps it runs itself are the main thread's own functions (body bounds, codecs, replies), in
 * the main handler's order, so its answers and errors are the same bytes.
 */
import type * as http from 'node:http';
import type { AddressInfo, ListenOptions } from 'node:net';
import { type Logger, SwitchyardError, toSwitchyardError } from '@switchyard/common';
import { decodeHttpInferRequest, parseInferenceHeaderLength } from '@switchyard/kserve';
import { type AccessPolicy, authorizeHttp } from '../access-control.js';
import { compileHeaderForwardPattern, forwardHeaders, rawHeaderPairs, type HeaderForwardPattern } from '../header-forward.js';
import { usesSharedMemory } from '../shared-memory-io.js';
import { inferBodyBound, readBody, requestEncoding } from '../http/http-body.js';
import { answerExpectContinue } from '../http/http-continue.js';
import { classifies, sendInferResponse } from '../http/http-infer.js';
import { createLimitedHttpServer, type HttpLimits } from '../http/http-limits.js';
import { sendError } from '../http/http-reply.js';
import { type Route, matchRoute, pathOf, versionOf } from '../http/http-router.js';
import { frontModel } from './front-state.js';
import { ownedBytes, postableRequest } from './front-messages.js';
import type { MainLink } from './front-link.js';
import { MainDoor } from './front-proxy.js';

/** The HTTP door's settings as a thread gets them. */
export interface HttpFrontConfig {
  readonly port: number;
  readonly host?: string;
  /** The main thread's door (front-proxy.ts). */
  readonly socketPath: string;
  readonly limits: HttpLimits;
  readonly maxInputSize: number;
  readonly maxBinaryInputSize: number;
  readonly access: AccessPolicy;
  /** `--http-header-forward-pattern` as given (compiled again here). */
  readonly headerForwardSource?: string;
}

/** A door of a front thread: `listen` resolves with the bound port; `close` stops accepting and finishes what is in flight. */
export interface ThreadDoor {
  listen(): Promise<number>;
  close(): Promise<void>;
}

export function httpThreadDoor(config: HttpFrontConfig, link: MainLink, logger: Logger): ThreadDoor {
  const main = new MainDoor(config.socketPath);
  const headerForward: HeaderForwardPattern | undefined = config.headerForwardSource === undefined ? undefined : compileHeaderForwardPattern(config.headerForwardSource);
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const server = createLimitedHttpServer(
    config.limits,
    (req, res) => {
      inFlight += 1;
      if (closing) res.setHeader('Connection', 'close');
      res.on('close', () => {
        inFlight -= 1;
        if (inFlight === 0) drained?.();
      });
      handle(req, res).catch((e: unknown) => {
        if (!(e instanceof SwitchyardError)) logger.warn({ err: e, path: pathOf(req.url) }, 'HTTP request failed unexpectedly');
        if (!res.headersSent) sendError(res, toSwitchyardError(e));
        else if (!res.writableEnded) res.end();
      });
    },
    logger,
  );
  answerExpectContinue(server, config);

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = pathOf(req.url);
    const route = matchRoute(path);
    if (route?.kind !== 'model' || route.action !== 'infer' || req.method !== 'POST') return main.forward(req, res);
    // Credentials first, as the main thread's door checks them.
    const refused = authorizeHttp(config.access, path, route, req.headers);
    if (refused !== undefined) return sendError(res, refused);
    return infer(req, res, route);
  }

  async function infer(req: http.IncomingMessage, res: http.ServerResponse, route: Extract<Route, { kind: 'model' }>): Promise<void> {
    let version: number | undefined;
    try {
      version = versionOf(route.version);
    } catch {
      return main.forward(req, res);
    }
    const model = frontModel(link.state, route.model, version);
    if (model === undefined || requestEncoding(req) !== 'identity') return main.forward(req, res);
    const raw = await readBody(req, inferBodyBound(req, config.maxInputSize, config.maxBinaryInputSize));
    const headerValue = req.headers['inference-header-content-length'];
    const headerLength = parseInferenceHeaderLength(Array.isArray(headerValue) ? headerValue[0] : headerValue, raw.byteLength);
    // a raw binary body is read against the model's inputs: the main thread's door does that
    if (headerLength === 0) return main.forward(req, res, raw);
    const body = ownedBytes(raw);
    const decoded = decodeHttpInferRequest({ modelName: route.model, modelVersion: version, body }, headerLength);
    if (usesSharedMemory(decoded.request) || classifies(decoded.outputs)) return main.forward(req, res, raw);
    if (headerForward !== undefined) forwardHeaders(headerForward, rawHeaderPairs(req.rawHeaders), decoded.request.parameters);

    if (res.destroyed) return;
    const { request, transfer } = postableRequest(decoded.request, body);
    // A client that goes away cancels its request and ends this handler at once.
    const remote = link.infer(request, transfer);
    const onClose = (): void => {
      if (!res.writableEnded) remote.cancel();
    };
    res.on('close', onClose);
    const answer = await remote.answer;
    res.off('close', onClose);
    if (answer === undefined) return;
    if ('error' in answer) throw answer.error;
    await sendInferResponse(req, res, answer.response, { defaultOutputKind: decoded.defaultOutputKind, outputs: decoded.outputs, batching: model.batching }, undefined);
  }

  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        // reusePort: node 22.12 / 23.1 and later (the host checks before starting threads)
        server.listen({ port: config.port, host: config.host, reusePort: true } as ListenOptions, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      }),
    close: async () => {
      if (closing) return;
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
      server.closeAllConnections();
      await closed;
      main.close();
    },
  };
}
