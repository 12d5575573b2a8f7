// A minimal router for the cluster-hop bench's floor: the least a Node.js process must do to carry one
// KServe HTTP request to a worker over the request plane and back, with nothing else. It reads each
// request's body (without parsing it), sends the worker's `infer` endpoint the request-plane message a
// router sends for that body (the binary payload is built once, at start; each request gets its own
// envelope: request id and attempt), waits for the one response frame, checks it is data, and answers
// with the real router's response bytes for the same request (given at start). No model registry,
// routing, validation, statistics, retries or stall watch: the router's work less everything of ours
// but the message format, so router / minimal is what our router code costs and minimal / direct what
// the hop itself (node:http, nats.js, the NATS server, the worker's request-plane side) costs. With
// `callHome` (as the router by default) it talks to the worker as the router does: over the call-home
// connection the worker dials (the runtime's CallHomeListener) — the response, and the request too once
// the worker has announced its instance there —, over NATS until then.
//
//   node bench/lib/minimal-router.mjs '<json: [natsUrl, namespace, model, bodyBase64, answerBase64, callHome]>'
//   (prints its HTTP port once listening)
import http from 'node:http';
import { connect, createInbox } from '@nats-io/transport-node';
import { decodeHttpInferRequest } from '@switchyard/kserve';
import { INFER_ENDPOINT, WORKER_COMPONENT, inferRequestToBinary } from '@switchyard/cluster';
import { decodeMessage, decodeResponseFrame, encodeMessage, endpointAddress, endpointSubject } from '@switchyard/runtime';
import { minimalCallHome } from './minimal-call-home.mjs';

const [natsUrl, namespace, model, bodyBase64, answerBase64, callHome] = JSON.parse(process.argv[2]);
const body = Buffer.from(bodyBase64, 'base64');
const answer = Buffer.from(answerBase64, 'base64');
// what the router's forward() sends a worker that takes raw tensors, for this body
const payload = inferRequestToBinary(decodeHttpInferRequest({ body, modelName: model, modelVersion: undefined }, body.length).request);
const subject = endpointSubject(endpointAddress(namespace, WORKER_COMPONENT, INFER_ENDPOINT));
const nc = await connect({ servers: natsUrl });
let next = 0;
// replies by token, over NATS (one wildcard inbox) or call-home
const prefix = createInbox();
const waiting = new Map();
const deliver = (token, data) => {
  const done = waiting.get(token);
  if (done === undefined || data.length === 0) return; // heartbeats carry nothing
  waiting.delete(token);
  done(data);
};
nc.subscribe(`${prefix}.*`, { callback: (err, m) => !err && deliver(m.subject, m.data) });
await nc.flush();
const home = await minimalCallHome(callHome, subject, deliver);
const target = home.target;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const id = (next++).toString(36);
    const message = encodeMessage({ v: 1, requestId: id, attempt: id, payload, deadline: null, finalData: true, ...(target === undefined ? {} : { callHome: target }) });
    const reply = `${prefix}.${id}`;
    new Promise((resolve) => {
      waiting.set(reply, resolve);
      if (!home.send(reply, message)) nc.publish(subject, message, { reply });
    }).then(
      (data) => {
        const frame = decodeResponseFrame(decodeMessage(data));
        if (frame.type !== 'data') throw new Error(`the worker answered a ${frame.type} frame`);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length });
        res.end(answer);
      },
    ).catch((e) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(e?.message ?? e));
    });
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => {
  server.close();
  void home.close();
  void nc.close().finally(() => process.exit(0));
});
