/**
 * The answer of every node:http door to a request node:http refuses before any handler runs
 * (the server's `clientError` event): a parse error, headers too large, a request too slow.
 *
 * node:http's own answer is a bare status line with no body. This one keeps node's statuses
 * (408 for a request past its timeout, 431 for headers past the parser's limit, 413 for chunk
 * extensions past it, 400 for anything else the parser refuses) and `Connection: close`, and adds
 * the `{"error": "..."}` body every other refusal of the door carries.
 *
 * A request carrying both `Content-Length` and `Transfer-Encoding: chunked` (Python `requests`
 * sends both when a caller sets Transfer-Encoding on a body of known length) stays refused:
 * Triton's libevent honours the chunked framing, but node's parser cannot be told to accept just
 * this case short of its lenient mode (`insecureHTTPParser`), which accepts other ambiguous
 * framings too; a server and a proxy in front of it that frame such a request differently are
 * the classic request-smuggling setup. The answer names both headers so the client knows which
 * to drop.
 *
 * As node does, nothing is written when a response on the connection has already started (its
 * bytes must not be corrupted) or the socket is no longer writable; the socket is then destroyed.
 */
import * as http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '@switchyard/common';

/** Both framing headers at once: llhttp's two codes for it (which one depends on header order). */
const AMBIGUOUS_FRAMING = new Set(['HPE_INVALID_CONTENT_LENGTH', 'HPE_UNEXPECTED_CONTENT_LENGTH', 'HPE_INVALID_TRANSFER_ENCODING']);

export const AMBIGUOUS_FRAMING_MESSAGE =
  'request has both Content-Length and Transfer-Encoding headers; this server refuses such requests (their framing is ambiguous): send only one of them';

interface ParserError extends Error {
  code?: string;
  /** llhttp's fixed description of what it refused. */
  reason?: string;
}

/** The status and message for an error node:http reports on a connection. */
export function clientErrorAnswer(e: ParserError): { status: number; message: string } {
  switch (e.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: 'Request Timeout' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, message: 'Request Header Fields Too Large' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, message: 'Payload Too Large' };
  }
  if (e.code !== undefined && AMBIGUOUS_FRAMING.has(e.code) && e.reason !== undefined && /Content-Length/.test(e.reason) && /Transfer-Encoding/.test(e.reason)) {
    return { status: 400, message: AMBIGUOUS_FRAMING_MESSAGE };
  }
  return { status: 400, message: typeof e.reason === 'string' && e.reason !== '' ? `Bad Request: ${e.reason}` : 'Bad Request' };
}

/**
 * Answer `clientError`s on `server` as described above. `handler` is the door's request
 * listener; the returned listener wraps it to know each connection's response in flight.
 */
export function answerClientErrors(server: http.Server, handler: http.RequestListener, logger: Logger): http.RequestListener {
  /** Each connection's latest response; one that has finished no longer counts as started. */
  const latest = new WeakMap<Duplex, http.ServerResponse>();
  server.on('clientError', (e: ParserError, socket: Duplex) => {
    const res = latest.get(socket);
    const s = socket as Partial<Socket> & Duplex;
    if (socket.writable && (res === undefined || res.writableFinished || !res.headersSent)) {
      const { status, message } = clientErrorAnswer(e);
      const body = JSON.stringify({ error: message });
      logger.debug({ code: e.code, status }, 'HTTP request refused by the parser');
      socket.write(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      // Flush the answer (a few hundred bytes), then close.
      if (typeof s.destroySoon === 'function') {
        s.destroySoon();
        return;
      }
    }
    socket.destroy();
  });
  return (req, res) => {
    // No listener per request: the next request replaces the entry, `writableFinished` tells a finished one.
    latest.set(req.socket, res);
    handler(req, res);
  };
}
