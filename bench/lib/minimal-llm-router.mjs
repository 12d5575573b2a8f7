// A minimal LLM router for the cluster-hop bench's time-to-first-token floor: the least a Node.js
// process must do to carry one streaming chat completion to a worker over the request plane, with one
// round trip to Redis on the way (where a router asks its routing table), and nothing else. Per request
// it parses the body and preprocesses its messages as any door must (the model's own chat template and
// tokenizer, `chatPrompt`: the work the worker does itself when called directly, so it is not part of
// the hop), runs a trivial script on Redis (`return 1`, the round trip alone), sends the worker's
// `generate` endpoint the request-plane message a router sends for those ids, and writes one
// server-sent event per data frame that carries tokens, then `[DONE]`. No request validation, routing
// decision, reservation, detokenizing, stop strings, statistics or retries: the hop this process adds
// is the floor of the router's hop on the machine.
//
//   node bench/lib/minimal-llm-router.mjs '<json: [natsUrl, redisUrl, namespace, model, modelFolder, maxTokens]>'
//   (prints its HTTP port once listening and subscribed)
import http from 'node:http';
import { connect, createInbox } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { ChatTemplate, Tokenizer, chatPrompt, compileSamplingParams } from '@switchyard/llm';
import { GENERATE_ENDPOINT, WORKER_COMPONENT, decodeWireGenerateOutput, generateRequestToWire } from '@switchyard/cluster';
import { decodeMessage, decodeResponseFrame, encodeMessage, endpointAddress, endpointSubject } from '@switchyard/runtime';
import { minimalCallHome } from './minimal-call-home.mjs';
import { readFile } from 'node:fs/promises';

const [natsUrl, redisUrl, namespace, model, folder, maxTokens, callHome] = JSON.parse(process.argv[2]);
const tokenizer = await Tokenizer.fromModelFolder(folder);
const chatTemplate = ChatTemplate.fromTokenizerConfig(JSON.parse(await readFile(`${folder}/tokenizer_config.json`, 'utf8')));
const endpoint = { tokenizer, chatTemplate, card: { name: model, contextLength: 1 << 20 } };
// the wire's sampling as a router sends it: the compiled parameters less `stop` (applied on text)
const { stop: _stop, ...sampling } = compileSamplingParams({ max_tokens: maxTokens });
const subject = endpointSubject(endpointAddress(namespace, WORKER_COMPONENT, GENERATE_ENDPOINT));
const CHUNK = `data: ${JSON.stringify({ object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }] })}\n\n`;

const redis = new Redis(redisUrl);
redis.defineCommand('floor', { numberOfKeys: 0, lua: 'return 1' });
const nc = await connect({ servers: natsUrl });
// one reply subscription for every request, told apart by the last token (as the router's plane does)
const prefix = createInbox();
const streams = new Map();
const deliver = (subject, data) => {
  const stream = streams.get(subject.slice(prefix.length + 1));
  if (stream === undefined || data.length === 0) return; // heartbeats carry no data
  stream(decodeResponseFrame(decodeMessage(data)));
};
nc.subscribe(`${prefix}.*`, { callback: (err, m) => !err && deliver(m.subject, m.data) });
await nc.flush();
// with callHome, as the router by default: frames come home over the worker's connection, and requests go down it
const home = await minimalCallHome(callHome, subject, deliver);
const target = home.target;
let next = 0;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const id = (next++).toString(36);
    const fail = (e) => {
      streams.delete(id);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(e?.message ?? e));
    };
    Promise.resolve()
      .then(() => chatPrompt(endpoint, JSON.parse(Buffer.concat(chunks).toString('utf8')).messages))
      .then(async ({ promptTokenIds }) => {
        await redis.floor();
        streams.set(id, (frame) => {
          if (frame.type === 'error') return fail(new Error(frame.error.message));
          if (frame.type === 'data') {
            const out = decodeWireGenerateOutput(frame.payload);
            if (out.tokenIds.length > 0) {
              if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
              res.write(CHUNK);
            }
            if (out.finishReason === null && frame.final !== true) return;
          }
          streams.delete(id);
          if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
          res.end('data: [DONE]\n\n');
        });
        const wire = generateRequestToWire({ model, requestId: `m-${id}`, promptTokenIds, sampling, outputTokenIds: [] });
        const message = encodeMessage({ v: 1, requestId: `m-${id}`, attempt: id, payload: wire, deadline: null, ...(target === undefined ? {} : { callHome: target }) });
        const reply = `${prefix}.${id}`;
        if (!home.send(reply, message)) nc.publish(subject, message, { reply });
      })
      .catch(fail);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => {
  server.close();
  redis.disconnect();
  void home.close();
  void nc.close().finally(() => process.exit(0));
});
