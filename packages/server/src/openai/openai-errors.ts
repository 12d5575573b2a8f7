/**
 * OpenAI's error rendering for the `/v1` routes: `{"error":{"message","type","param","code"}}`, the
 * HTTP status from the one code → status table (`http-status.ts`). This and `http-reply.ts` are the
 * only places a SwitchyardError becomes HTTP.
 *
 * - `type`: `invalid_request_error` for statuses below 500, `server_error` from 500 up (OpenAI's
 *   values; the SDK picks its exception class from the status alone).
 * - `param`: the request field an `InvalidParamError` names, else null.
 * - `code`: `model_not_found` for `not_found` (the only thing the OpenAI door looks up is the model),
 *   `invalid_api_key` for `unauthenticated` (`--openai-api-key`), else null.
 * - A 401 carries `WWW-Authenticate: Bearer` (RFC 9110).
 */
import type { ServerResponse } from 'node:http';
import { type SwitchyardError, toSwitchyardError } from '@switchyard/common';
import { errorParam, type OpenAiErrorBody } from '@switchyard/llm';
import { httpStatusFromErrorCode } from '../http-status.js';
import { sendJson } from '../http/http-reply.js';

export function openAiErrorBody(status: number, message: string, param: string | null = null, code: string | null = null): OpenAiErrorBody {
  return { error: { message, type: status < 500 ? 'invalid_request_error' : 'server_error', param, code } };
}

/** The status and body for anything thrown while serving an OpenAI request. */
export function renderOpenAiError(error: unknown): { status: number; body: OpenAiErrorBody } {
  const e: SwitchyardError = toSwitchyardError(error);
  const status = httpStatusFromErrorCode(e.code);
  const code = e.code === 'not_found' ? 'model_not_found' : e.code === 'unauthenticated' ? 'invalid_api_key' : null;
  return { status, body: openAiErrorBody(status, e.message, errorParam(e), code) };
}

export function sendOpenAiError(res: ServerResponse, error: unknown): void {
  const { status, body } = renderOpenAiError(error);
  sendJson(res, status, JSON.stringify(body), status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {});
}

/** A status the router decides (404 unknown path, 405 wrong method), with OpenAI's body. */
export function sendOpenAiStatus(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, JSON.stringify(openAiErrorBody(status, message)));
}
