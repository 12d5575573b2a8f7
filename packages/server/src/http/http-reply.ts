/**
 * Writing HTTP replies. Every error is `{"error":"<message>"}` with Content-Type
 * application/json and the status from `httpStatusFromErrorCode`; this is the only place where
 * a SwitchyardError turns into HTTP.
 */
import type { ServerResponse } from 'node:http';
import { type SwitchyardError, toSwitchyardError } from '@switchyard/common';
import { httpStatusFromErrorCode } from '../http-status.js';

export type Headers = Record<string, string | number>;

/** Replies of several chunks up to this size are joined into one (a copy costs less than a write each). */
const JOIN_CHUNKS_BELOW = 64 * 1024;

/** Send a complete reply. `body` may be several chunks (JSON header + binary blobs). */
export function send(res: ServerResponse, status: number, body: string | Uint8Array | readonly Uint8Array[], headers: Headers = {}): void {
  if (res.headersSent || res.destroyed) return;
  // One writeHead stores every header (headers set before with setHeader are kept, in front).
  if (typeof body === 'string') {
    res.writeHead(status, { ...headers, 'Content-Length': Buffer.byteLength(body, 'utf8') });
    res.end(body, 'utf8');
    return;
  }
  const chunks = body instanceof Uint8Array ? [body] : body;
  let length = 0;
  for (const c of chunks) length += c.byteLength;
  res.writeHead(status, { ...headers, 'Content-Length': length });
  if (chunks.length > 1 && length < JOIN_CHUNKS_BELOW) {
    res.end(Buffer.concat(chunks, length));
    return;
  }
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
