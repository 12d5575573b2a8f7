/**
 * Test support: a raw HTTP client over node:http (no automatic decompression or retries), so
 * tests see exactly the bytes and headers the server sent. Not exported from the package entry.
 */
import * as http from 'node:http';

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
  json: () => unknown;
}

export interface RawRequestOptions {
  headers?: Record<string, string | number>;
  body?: string | Uint8Array | Iterable<Uint8Array>;
  /** Send the body with Transfer-Encoding: chunked, one write per element. */
  chunked?: boolean;
}

export function rawRequest(port: number, method: string, path: string, options: RawRequestOptions = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        const text = body.toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    const body = options.body;
    if (body === undefined) {
      req.end();
    } else if (typeof body === 'string' || body instanceof Uint8Array) {
      if (!options.chunked) req.setHeader('Content-Length', Buffer.byteLength(body));
      req.end(body);
    } else {
      for (const chunk of body) req.write(chunk);
      req.end();
    }
  });
}

/**
 * A POST to `path` sending `headers` and `Expect: 100-continue`, and none of its body: the answer the
 * server gives before asking for the body, or `continued` (status 100) when it asks for it.
 */
export function expectContinueAnswer(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; text: string; continued: boolean }> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { Expect: '100-continue', ...headers } });
    req.on('continue', () => {
      continued = true;
      req.destroy();
      resolve({ status: 100, text: '', continued });
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, continued }));
    });
    req.on('error', (e) => (continued ? undefined : reject(e)));
    req.flushHeaders();
  });
}
