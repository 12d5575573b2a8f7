/**
 * Writing HTTP replies. Every error is `{"error":"<message>"}` with Content-Type
 * application/json and the status from `httpStatusFromErrorCode`; this is the only place where
 * a SwitchyardError turns into HTTP.
 */
import type { ServerResponse } from 'node:http';
import { type SwitchyardError, toSwitchyardError } from '@switchyard/common';
import { httpStatusFromErrorCode } from '../http-status.js';

export type Headers = Record<string, string | number>;

/** Send a complete reply. `body` may be several chunks (JSON header + binary blobs). */
export function send(res: ServerResponse, status: number, body: string | Uint8Array | readonly Uint8Array[], headers: Headers = {}): void {
  if (res.headersSent || res.destroyed) return;
  const chunks = typeof body === 'string' ? [Buffer.from(body, 'utf8')] : body instanceof Uint8Array ? [body] : body;
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  // One call stores every header (headers set before with setHeader are kept, in front).
  res.writeHead(status, { ...headers, 'Content-Length': length });
  for (let i = 0; i < chunks.length - 1; i++) res.write(chunks[i] as Uint8Array);
  res.end(chunks[chunks.length - 1]);
}

export function sendJson(res: ServerResponse, status: number, json: string, headers: Headers = {}): void {
  send(res, status, json, { 'Content-Type': 'application/json', ...headers });
}

/** An empty reply (health, ready, load/unload...). */
export function sendEmpty(res: ServerResponse, status: number, headers: Headers = {}): void {
  send(res, status, [], headers);
}

export function errorBody(message: string): string {
  return JSON.stringify({ error: message });
}

export function sendError(res: ServerResponse, error: unknown, headers: Headers = {}): void {
  const e: SwitchyardError = toSwitchyardError(error);
  sendJson(res, httpStatusFromErrorCode(e.code), errorBody(e.message), headers);
}
