/**
 * How the NATS request plane puts its messages on the wire, below the response-stream protocol:
 *
 * - **Chunks.** NATS refuses a message larger than the server's `max_payload` (1 MiB by default;
 *   tensors travel base64 in JSON, so a 750 KiB tensor is already too big). A larger message is sent
 *   as consecutive NATS messages to the same subject, each with header `Sy-Chunk: <index>/<count>`;
 *   NATS keeps the order of one publisher's messages on one subject, and the receiver joins them
 *   (`ChunkAssembler`) before decoding. A chunked request must go to one instance's own subject (a
 *   queue group could hand the chunks to different instances).
 * - **Heartbeats.** A message with header `Sy-Heartbeat` and no body, sent by a worker to a request's
 *   reply inbox while the handler has produced nothing for `HEARTBEAT_INTERVAL_MS`: a unary request
 *   that computes for minutes is not mistaken for a dead worker by the caller's idle timeout.
 *   Heartbeats carry no sequence number and never reach the frame reader.
 */
import { type Msg, type MsgHdrs, type NatsConnection, headers } from '@nats-io/nats-core';
import { invalidArgument } from '@switchyard/common';

export const CHUNK_HEADER = 'Sy-Chunk';
export const HEARTBEAT_HEADER = 'Sy-Heartbeat';
/** A worker's heartbeat period on a silent stream (a sixth of the callers' default 30 s idle timeout). */
export const HEARTBEAT_INTERVAL_MS = 5_000;
/** nats-server's default `max_payload`, used until the server's INFO says otherwise. */
export const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
/** Room left in each chunk for the NATS headers. */
const HEADER_ROOM = 4096;
/** Largest message a receiver joins from chunks (bigger ones fail `invalid_argument`). */
export const DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 * 1024;

/** The largest body one NATS message may carry on this connection. */
export function chunkSize(nc: NatsConnection): number {
  const max = nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  return Math.max(1024, max - HEADER_ROOM);
}

/** True when `data` has to travel in several messages. */
export function needsChunks(nc: NatsConnection, data: Uint8Array): boolean {
  return data.length > chunkSize(nc);
}

/** Publish `data` to `subject`, in chunks when it is larger than one message may be. */
export function publishFramed(nc: NatsConnection, subject: string, data: Uint8Array, reply?: string): void {
  const size = chunkSize(nc);
  if (data.length <= size) {
    nc.publish(subject, data, reply === undefined ? undefined : { reply });
    return;
  }
  const count = Math.ceil(data.length / size);
  for (let i = 0; i < count; i++) {
    const h = headers();
    h.set(CHUNK_HEADER, `${i}/${count}`);
    nc.publish(subject, data.subarray(i * size, Math.min(data.length, (i + 1) * size)), { ...(reply === undefined ? {} : { reply }), headers: h });
  }
}

/** What a stopped endpoint says to a request it will not run: NATS's own no-responders status (503, empty), which callers already take as "send it elsewhere". */
export const REFUSED_DESCRIPTION = 'Endpoint Stopped';

/** Refuse the request whose reply subject is `reply` as NATS refuses one nobody serves: an empty message with status 503. */
export function publishNoResponders(nc: NatsConnection, reply: string): void {
  nc.publish(reply, new Uint8Array(0), { headers: headers(503, REFUSED_DESCRIPTION) });
}

export function publishHeartbeat(nc: NatsConnection, subject: string): void {
  const h = headers();
  h.set(HEARTBEAT_HEADER, '1');
  nc.publish(subject, new Uint8Array(0), { headers: h });
}

export function isHeartbeat(m: Msg): boolean {
  return headerOf(m.headers, HEARTBEAT_HEADER) !== undefined;
}

function headerOf(h: MsgHdrs | undefined, name: string): string | undefined {
  if (h === undefined || !h.has(name)) return undefined;
  return h.get(name);
}

/**
 * Joins chunked messages, one partial message per key (a reply inbox: one stream, one publisher, in
 * order). `accept` returns the whole message when `m` completes it (or is not a chunk), null while
 * chunks are missing; it throws `invalid_argument` on a chunk out of order or a message over
 * `maxBytes`, and forgets that key.
 */
export class ChunkAssembler {
  private readonly partial = new Map<string, { readonly count: number; next: number; bytes: number; readonly parts: Uint8Array[]; readonly since: number }>();

  constructor(private readonly maxBytes: number = DEFAULT_MAX_MESSAGE_BYTES) {}

  accept(key: string, m: Msg): Uint8Array | null {
    const tag = headerOf(m.headers, CHUNK_HEADER);
    if (tag === undefined) return m.data;
    const match = /^(\d+)\/(\d+)$/.exec(tag);
    const index = match ? Number(match[1]) : NaN;
    const count = match ? Number(match[2]) : NaN;
    let p = this.partial.get(key);
    if (!(count >= 2 && index < count) || (p === undefined ? index !== 0 : p.count !== count || p.next !== index)) {
      this.partial.delete(key);
      throw invalidArgument(`chunk '${tag}' out of order`);
    }
    if (p === undefined) {
      p = { count, next: 0, bytes: 0, parts: [], since: Date.now() };
      this.partial.set(key, p);
    }
    p.bytes += m.data.length;
    if (p.bytes > this.maxBytes) {
      this.partial.delete(key);
      throw invalidArgument(`message larger than ${this.maxBytes} bytes`);
    }
    p.parts.push(m.data.slice()); // the client may reuse the buffer behind m.data
    p.next++;
    if (p.next < p.count) return null;
    this.partial.delete(key);
    return Buffer.concat(p.parts);
  }

  /** Drop partial messages older than `ms` (their sender died mid-message); returns how many. */
  expire(ms: number, now = Date.now()): number {
    let n = 0;
    for (const [key, p] of this.partial) {
      if (now - p.since > ms) {
        this.partial.delete(key);
        n++;
      }
    }
    return n;
  }

  forget(key: string): void {
    this.partial.delete(key);
  }

  get size(): number {
    return this.partial.size;
  }
}
