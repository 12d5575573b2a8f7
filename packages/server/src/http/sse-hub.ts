/**
 * SseHub: server-sent events to a bounded set of HTTP clients (the router's dashboard stream).
 *
 * Bounds: at most `maxClients` streams at once (one more is answered 503 with a JSON error and never
 * held); each client may have at most `maxBufferedBytes` written but not yet taken by its socket: a
 * client that falls that far behind (a stalled tab, a slow link) is dropped — its connection is
 * destroyed, the others go on — rather than buffered without end. Frames are whole events
 * (`event:` / `data:` lines); data never contains a newline (callers send JSON), so one `data:` line.
 *
 * Lifecycle: `accept` while open; `close()` ends every stream (the HTTP door's drain waits for its
 * in-flight responses, so a hub must be closed before its door) and refuses later ones with 503.
 * Single event loop, no locking.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export const DEFAULT_SSE_MAX_CLIENTS = 16;
export const DEFAULT_SSE_MAX_BUFFERED_BYTES = 1024 * 1024;

export interface SseHubOptions {
  /** Streams open at once; default DEFAULT_SSE_MAX_CLIENTS (16). */
  readonly maxClients?: number;
  /** Bytes one client may leave unsent before it is dropped; default DEFAULT_SSE_MAX_BUFFERED_BYTES (1 MiB). */
  readonly maxBufferedBytes?: number;
  /** Called with the new count whenever a client joins or leaves. */
  readonly onClients?: (count: number) => void;
}

export class SseHub {
  /** Clients dropped because they fell `maxBufferedBytes` behind. */
  dropped = 0;
  private readonly clients = new Set<ServerResponse>();
  private readonly maxClients: number;
  private readonly maxBufferedBytes: number;
  private closed = false;

  constructor(private readonly options: SseHubOptions = {}) {
    this.maxClients = options.maxClients ?? DEFAULT_SSE_MAX_CLIENTS;
    this.maxBufferedBytes = options.maxBufferedBytes ?? DEFAULT_SSE_MAX_BUFFERED_BYTES;
    if (!Number.isSafeInteger(this.maxClients) || this.maxClients < 1) throw new RangeError(`maxClients must be an integer >= 1, got ${this.maxClients}`);
    if (!Number.isSafeInteger(this.maxBufferedBytes) || this.maxBufferedBytes < 1) throw new RangeError(`maxBufferedBytes must be an integer >= 1, got ${this.maxBufferedBytes}`);
  }

  get size(): number {
    return this.clients.size;
  }

  /**
   * Take `res` as an event stream (headers sent at once) and write `first` (the event a new client
   * starts from) to it alone. false when the hub is full or closed: `res` was answered 503.
   */
  accept(req: IncomingMessage, res: ServerResponse, first?: { event: string; data: string }): boolean {
    if (this.closed || this.clients.size >= this.maxClients) {
      const body = JSON.stringify({ error: this.closed ? 'the event stream is closing' : `too many event stream clients (at most ${this.maxClients})` });
      res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Retry-After': '5' });
      res.end(body);
      return false;
    }
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
      // a reverse proxy (nginx) must not buffer the stream
      'X-Accel-Buffering': 'no',
    });
    // the client's reconnect delay after a dropped stream
    res.write('retry: 2000\n\n');
    this.clients.add(res);
    const gone = (): void => {
      if (this.clients.delete(res)) this.options.onClients?.(this.clients.size);
    };
    res.on('close', gone);
    req.on('close', gone);
    this.options.onClients?.(this.clients.size);
    if (first !== undefined) this.write(res, frame(first.event, first.data));
    return true;
  }

  /** One event to every client; a client too far behind is dropped instead. */
  send(event: string, data: string): void {
    const f = frame(event, data);
    if (this.clients.size === 0) return;
    for (const res of [...this.clients]) this.write(res, f);
  }

  /** End every stream; later `accept`s answer 503. Idempotent. */
  close(): void {
    this.closed = true;
    for (const res of [...this.clients]) {
      this.clients.delete(res);
      res.end();
    }
    this.options.onClients?.(0);
  }

  private write(res: ServerResponse, f: string): void {
    if (res.writableLength + Buffer.byteLength(f) > this.maxBufferedBytes) {
      this.dropped++;
      this.clients.delete(res);
      this.options.onClients?.(this.clients.size);
      res.destroy();
      return;
    }
    res.write(f);
  }
}

function frame(event: string, data: string): string {
  if (/[\r\n]/.test(event) || /[\r\n]/.test(data)) throw new RangeError('an event name or its data contains a line break');
  return `event: ${event}\ndata: ${data}\n\n`;
}
