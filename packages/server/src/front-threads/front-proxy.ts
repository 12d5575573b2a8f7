/**
 * A front thread hands a request it does not serve itself to the main thread's HTTP door, over the
 * door's private Unix socket, and relays the answer: status, headers and body as they come (a
 * Server-Sent Events stream flows through chunk by chunk). The main thread's handlers answer every
 * route exactly as without threads.
 *
 * Hop-by-hop headers stay on their own connection (RFC 9110 §7.6.1); `Expect` was answered by the
 * thread already. An answer the main thread closes its connection after (`Connection: close`: a
 * refused body, a door that is stopping) closes the client's connection too, so a client never goes
 * on sending a body nobody reads. A client that goes away aborts the main thread's request (its
 * handler sees the close, as for a direct client); a main thread that fails the request mid-answer
 * ends the client's connection.
 */
import * as http from 'node:http';
import { unavailable } from '@switchyard/common';
import { sendError } from '../http/http-reply.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect']);

/** The end-to-end headers of `raw` (a message's rawHeaders), repeated ones as lists; `also`: one more name to leave out. */
function endToEnd(raw: readonly string[], also?: string): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === also) continue;
    const prev = out[name];
    out[name] = prev === undefined ? (raw[i + 1] as string) : ([] as string[]).concat(prev as string | string[], raw[i + 1] as string);
  }
  return out;
}

/** The main thread's door on `socketPath`, over kept-alive connections. */
export class MainDoor {
  readonly #agent: http.Agent;
  readonly #socketPath: string;

  constructor(socketPath: string) {
    this.#socketPath = socketPath;
    this.#agent = new http.Agent({ keepAlive: true });
  }

  /**
   * Relay `req` to the main thread and its answer to `res`. `body`: the body already read from `req`
   * (the request is then sent with it); absent, the body is streamed from `req` as it arrives.
   */
  forward(req: http.IncomingMessage, res: http.ServerResponse, body?: Uint8Array): void {
    const headers = endToEnd(req.rawHeaders, body !== undefined ? 'content-length' : undefined);
    if (body !== undefined) headers['Content-Length'] = body.byteLength;
    const upstream = http.request({ socketPath: this.#socketPath, agent: this.#agent, method: req.method, path: req.url, headers });
    let answered = false;
    upstream.on('response', (up) => {
      answered = true;
      const out = endToEnd(up.rawHeaders);
      if (up.headers.connection?.toLowerCase() === 'close') out['Connection'] = 'close';
      if (res.destroyed) {
        up.destroy();
        return;
      }
      res.writeHead(up.statusCode ?? 502, out);
      up.pipe(res);
      up.on('error', () => res.destroy());
      up.on('aborted', () => res.destroy());
      up.on('close', () => {
        if (!up.complete) res.destroy();
      });
    });
    upstream.on('error', (e) => {
      if (answered || res.destroyed) {
        res.destroy();
        return;
      }
      sendError(res, unavailable(`the server's main thread did not answer: ${e.message}`), { Connection: 'close' });
      req.resume();
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (body !== undefined) upstream.end(body);
    else req.pipe(upstream);
  }

  close(): void {
    this.#agent.destroy();
  }
}
