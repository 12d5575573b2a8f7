/**
 * The probe against a small fake worker (a local HTTP server whose answers each test sets): what it
 * sends, how it times, and that every broken answer ends in a named error rather than a hang or a crash.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { readWorkerLimits, WorkerProbe, type WorkerProbeOptions } from './worker-probe.js';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
let handler: Handler = (_req, _body, res) => res.writeHead(500).end();
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const options = (over: Partial<WorkerProbeOptions> = {}): WorkerProbeOptions => ({ url, model: 'm', requestTimeoutMs: 2000, signal: new AbortController().signal, ...over });

const LLM_CONFIG = {
  name: 'm',
  backend: 'mocker',
  parameters: { block_size: { string_value: '32' }, num_gpu_blocks: { string_value: '100' }, max_num_seqs: { string_value: '4' } },
};

function serve(config: unknown, models: unknown): Handler {
  return (req, _body, res) => {
    const json = (status: number, v: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(v));
    if (req.url === '/v2/models/m/config') return json(200, config);
    if (req.url?.startsWith('/v2/models/')) return json(404, { error: "Request for unknown model: 'x' is not found" });
    if (req.url === '/v1/models') return json(200, models);
    return json(404, { error: 'no route' });
  };
}

/** A completions stream: `tokens` chunks `gapMs` apart, then usage, then [DONE]. */
function stream(tokens: number, gapMs: number, usage: (prompt: number) => object, extra?: string): Handler {
  return (_req, body, res) => {
    const prompt = (JSON.parse(body) as { prompt: number[] }).prompt.length;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let sent = 0;
    const tick = (): void => {
      if (sent < tokens) {
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, text: 'x' }] })}\n\n`);
        sent++;
        setTimeout(tick, gapMs);
        return;
      }
      if (extra !== undefined) res.write(extra);
      res.write(`data: ${JSON.stringify({ choices: [], usage: usage(prompt) })}\n\ndata: [DONE]\n\n`);
      res.end();
    };
    setTimeout(tick, gapMs);
  };
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (isSwitchyardError(err)) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error('expected a failure');
}

describe('readWorkerLimits', () => {
  it("compiles the model's engine settings and takes max_model_len from the OpenAI card", async () => {
    handler = serve(LLM_CONFIG, { object: 'list', data: [{ id: 'm', max_model_len: 777 }] });
    expect(await readWorkerLimits(options())).toEqual({ maxModelLen: 777, blockSize: 32, numBlocks: 100, maxNumSeqs: 4 });
  });

  it('names what is wrong: no model, not an LLM, not ready, unreachable', async () => {
    handler = serve(LLM_CONFIG, { data: [] });
    expect(await code(readWorkerLimits(options({ model: 'x' })))).toMatch(/^not_found: the worker at .* serves no model 'x'/);
    expect(await code(readWorkerLimits(options()))).toMatch(/^not_found: .*lists no OpenAI model 'm'/);
    handler = serve({ name: 'm', backend: 'onnxruntime' }, { data: [] });
    expect(await code(readWorkerLimits(options()))).toMatch(/^unsupported: model 'm' is not an LLM \(backend 'onnxruntime'\)/);
    handler = serve('not a config', { data: [] });
    expect(await code(readWorkerLimits(options()))).toMatch(/^invalid_argument/);
    expect(await code(readWorkerLimits(options({ url: 'http://127.0.0.1:1' })))).toMatch(/^unavailable: worker unreachable at http:\/\/127.0.0.1:1/);
  });
});

describe('WorkerProbe', () => {
  it('sends token-id prompts of the exact length with ignore_eos and times the stream', async () => {
    let sent: Record<string, unknown> = {};
    const inner = stream(5, 20, (prompt) => ({ prompt_tokens: prompt, completion_tokens: 5 }));
    handler = (req, body, res) => {
      sent = JSON.parse(body) as Record<string, unknown>;
      inner(req, body, res);
    };
    const probe = new WorkerProbe(options());
    const itl = await probe.decodeItlMs({ context: 12, concurrency: 2, isl: 10, osl: 5, kvUsage: 0.1 });
    expect(itl).toBeGreaterThan(12);
    expect(itl).toBeLessThan(200);
    expect(sent).toMatchObject({ model: 'm', max_tokens: 5, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    const prompt = sent.prompt as number[];
    expect(prompt).toHaveLength(10);
    for (const id of prompt) expect(Number.isInteger(id) && id >= 1 && id < 256).toBe(true);
    handler = stream(1, 30, (prompt) => ({ prompt_tokens: prompt, completion_tokens: 1 }));
    expect(await probe.prefillTtftMs(7)).toBeGreaterThanOrEqual(25);
  });

  it('refuses answers that break the protocol or the asked lengths', async () => {
    const probe = new WorkerProbe(options());
    handler = stream(3, 1, (prompt) => ({ prompt_tokens: prompt, completion_tokens: 3 }));
    expect(await code(probe.decodeItlMs({ context: 5, concurrency: 1, isl: 4, osl: 4, kvUsage: 0.1 }))).toMatch(/^unsupported: .*produced 3 tokens where 4 were asked/);
    handler = stream(2, 1, (prompt) => ({ prompt_tokens: prompt + 1, completion_tokens: 2 }));
    expect(await code(probe.decodeItlMs({ context: 5, concurrency: 1, isl: 4, osl: 2, kvUsage: 0.1 }))).toMatch(/^internal: .*counted 5 prompt tokens for 4 token ids/);
    handler = stream(1, 1, (prompt) => ({ prompt_tokens: prompt, completion_tokens: 1 }), `data: ${JSON.stringify({ error: { message: 'engine died' } })}\n\n`);
    expect(await code(probe.prefillTtftMs(3))).toMatch(/^unavailable: .*mid-stream: engine died/);
    handler = stream(1, 1, (prompt) => ({ prompt_tokens: prompt, completion_tokens: 1 }), 'data: {not json\n\n');
    expect(await code(probe.prefillTtftMs(3))).toMatch(/^internal: .*not JSON/);
    handler = (_req, _body, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'token id 300 is out of the vocabulary' } }));
    expect(await code(probe.prefillTtftMs(3))).toMatch(/^unavailable: .*HTTP 400: token id 300 is out of the vocabulary/);
    handler = (_req, _body, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('data: [DONE]\n\n');
    expect(await code(probe.prefillTtftMs(3))).toMatch(/^internal: .*without a token or without usage/);
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: ' + 'x'.repeat((1 << 20) + 10));
    };
    expect(await code(probe.prefillTtftMs(3))).toMatch(/^internal: .*longer than 1048576 bytes/);
  });

  it('gives up on a silent worker at the request timeout, and at once when the run is out of time', async () => {
    handler = (_req, _body, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).write(': waiting\n\n');
    const slow = new WorkerProbe(options({ requestTimeoutMs: 200 }));
    expect(await code(slow.prefillTtftMs(3))).toMatch(/^deadline_exceeded: .*within 200 ms/);
    const done = new AbortController();
    done.abort();
    expect(await code(new WorkerProbe(options({ signal: done.signal })).prefillTtftMs(3))).toMatch(/^deadline_exceeded: profiling ran out of time/);
  });
});
