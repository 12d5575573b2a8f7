/**
 * `Expect: 100-continue` (curl sends it for larger bodies): a request refused by access control, or
 * whose declared body is over its bound, is answered before the client sends the body, and its
 * connection closed; any other gets `100 Continue` and is served. Shared by the door and its front
 * threads, which answer the same way.
 */
import type * as http from 'node:http';
import { authorizeHttp, type AccessPolicy } from '../access-control.js';
import { sendOpenAiError } from '../openai/openai-errors.js';
import { type BodyBound, bodyBound, declaredLength, inferBodyBound } from './http-body.js';
import { sendError } from './http-reply.js';
import { isOpenAiPath, matchRoute, pathOf } from './http-router.js';

export interface ContinueBounds {
  readonly access: AccessPolicy;
  readonly maxInputSize: number;
  readonly maxBinaryInputSize: number;
}

/** Answer `checkContinue` on `server`: refuse early, or continue and emit the request. */
export function answerExpectContinue(server: http.Server, bounds: ContinueBounds): void {
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = pathOf(req.url);
    const route = matchRoute(path);
    const refused = authorizeHttp(bounds.access, path, route, req.headers);
    if (refused !== undefined) {
      res.setHeader('Connection', 'close');
      if (isOpenAiPath(path)) sendOpenAiError(res, refused);
      else sendError(res, refused);
      return;
    }
    const bound: BodyBound = route?.kind === 'model' && route.action === 'infer' ? inferBodyBound(req, bounds.maxInputSize, bounds.maxBinaryInputSize) : bodyBound(bounds.maxInputSize);
    const declared = declaredLength(req);
    const error = bound.refusal ?? (declared !== undefined && declared > bound.limit ? bound.tooLarge(declared) : undefined);
    if (error !== undefined) {
      res.setHeader('Connection', 'close');
      if (isOpenAiPath(path)) sendOpenAiError(res, error);
      else sendError(res, error);
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
}
