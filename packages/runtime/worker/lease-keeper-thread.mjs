// The body of a `LeaseKeeper` (src/lease-keeper.ts): keeps one etcd lease alive from its own thread,
// with its own etcd connection, so a busy or blocked main event loop cannot starve the keep-alives.
// Plain JavaScript beside src/ (like packages/engine/worker/) so that the same
// `new URL('../worker/lease-keeper-thread.mjs', import.meta.url)` works from dist/ and from src/
// under vitest. Message shapes are typed in src/lease-keeper.ts.
//
// workerData: { hosts: string[], dialTimeoutMs: number, ttlSeconds: number }
// in:  { type: 'start', leaseId: string (decimal), grantedAt: ms epoch (sent before the grant) }
//      { type: 'stop' }  → stop sending, close the connection, exit the thread
// out: { type: 'alive', ttl: seconds, at: ms epoch }  one per acknowledged keep-alive
//      { type: 'lost', reason }  etcd answered TTL 0 (lease revoked / expired), or no keep-alive was
//                                acknowledged for longer than the TTL; the thread then goes idle
//
// Protocol: one LeaseKeepAlive bidi stream, `{ ID }` written every TTL/3; etcd answers each with
// `{ ID, TTL }`. The lease is counted alive until (send time of the last acknowledged keep-alive) +
// TTL, a bound etcd's own expiry can only exceed. A stream that errors, ends or leaves a keep-alive
// unanswered for TTL/3 is replaced (etcd3's pool picks a host, so this fails over between hosts).
import { parentPort, workerData } from 'node:worker_threads';
import { Etcd3 } from 'etcd3';

const { hosts, dialTimeoutMs, ttlSeconds } = workerData;
const ttlMs = ttlSeconds * 1000;
const intervalMs = ttlMs / 3;
/** How often the expiry bound is checked, and the retry delay after a failed stream. */
const WATCHDOG_MS = Math.min(250, intervalMs);
const RETRY_MS = Math.min(250, intervalMs);

const describe = (e) => (e instanceof Error ? e.message : String(e));
const client = new Etcd3({ hosts, dialTimeout: dialTimeoutMs });

let leaseId = null;
/** Send time (ms) of the last acknowledged keep-alive (first: of the grant). */
let lastOk = 0;
let done = false;
let stream = null;
let opening = false;
/** Send times of the keep-alives written on `stream` and not yet answered (answers come in order). */
let pending = [];
let lastError = null;
let sendTimer = null;
let watchdogTimer = null;
let retryTimer = null;

parentPort.on('message', (msg) => {
  if (msg.type === 'start' && leaseId === null && !done) {
    leaseId = msg.leaseId;
    lastOk = msg.grantedAt;
    sendTimer = setInterval(tick, intervalMs);
    watchdogTimer = setInterval(checkExpiry, WATCHDOG_MS);
    openStream();
  } else if (msg.type === 'stop') {
    shutdown();
    client.close();
    parentPort.close();
  }
});

function checkExpiry() {
  if (done) return;
  const since = Date.now() - lastOk;
  if (since > ttlMs) {
    const why = lastError ? `: ${describe(lastError)}` : '';
    lose(`no keep-alive acknowledged for ${since} ms (TTL ${ttlSeconds} s)${why}`);
  }
}

function tick() {
  if (done) return;
  checkExpiry();
  if (done) return;
  if (stream === null) {
    openStream();
  } else if (pending.length > 0 && Date.now() - pending[0] >= intervalMs) {
    lastError = new Error(`keep-alive unanswered for ${Date.now() - pending[0]} ms`);
    dropStream();
    openStream();
  } else {
    send();
  }
}

function openStream() {
  if (done || opening || stream !== null) return;
  opening = true;
  client.leaseClient.leaseKeepAlive().then(
    (s) => {
      opening = false;
      if (done) {
        s.end();
        return;
      }
      stream = s;
      pending = [];
      s.on('data', (res) => onAnswer(s, res));
      s.on('error', (err) => onStreamEnd(s, err));
      s.on('end', () => onStreamEnd(s, new Error('keep-alive stream ended')));
      send();
    },
    (err) => {
      opening = false;
      lastError = err;
      scheduleRetry();
    },
  );
}

function send() {
  if (done || stream === null) return;
  pending.push(Date.now());
  try {
    stream.write({ ID: leaseId });
  } catch (err) {
    onStreamEnd(stream, err);
  }
}

function onAnswer(s, res) {
  if (done || s !== stream) return;
  const sentAt = pending.shift() ?? Date.now();
  const ttl = Number(res.TTL);
  if (!(ttl > 0)) {
    lose(`etcd reports lease ${leaseId} gone (keep-alive answered TTL ${res.TTL}): revoked or expired`);
    return;
  }
  lastOk = Math.max(lastOk, sentAt);
  lastError = null;
  parentPort.postMessage({ type: 'alive', ttl, at: Date.now() });
}

function onStreamEnd(s, err) {
  if (done || s !== stream) return;
  lastError = err;
  dropStream();
  scheduleRetry();
}

function dropStream() {
  const s = stream;
  stream = null;
  pending = [];
  if (s !== null) {
    try {
      s.end();
    } catch {
      // already ended
    }
  }
}

function scheduleRetry() {
  if (done || retryTimer !== null) return;
  retryTimer = setTimeout(() => {
    retryTimer = null;
    openStream();
  }, RETRY_MS);
}

function lose(reason) {
  if (done) return;
  shutdown();
  parentPort.postMessage({ type: 'lost', reason });
}

function shutdown() {
  done = true;
  clearInterval(sendTimer);
  clearInterval(watchdogTimer);
  clearTimeout(retryTimer);
  retryTimer = null;
  dropStream();
}
