// The body of a `LeaseKeeper` (src/lease-keeper.ts): keeps one etcd lease alive from its own thread,
// with its own etcd connection, so a busy or blocked main event loop cannot starve the keep-alives.
// Plain JavaScript beside src/ (like packages/engine/worker/) so that the same
// `new URL('../worker/lease-keeper-thread.mjs', import.meta.url)` works from dist/ and from src/
// under vitest. Message shapes are typed in src/lease-keeper.ts.
//
// workerData: { hosts: string[], dialTimeoutMs: number, ttlSeconds: number }
// in:  { type: 'start', leaseId: string (decimal), grantedAt: ms epoch (sent before the grant) }
//        keep this lease alive (again after `gone`, or instead of the current one)
//      { type: 'stop' }  → stop sending, close the connection, exit the thread
// out: { type: 'alive', ttl: seconds, at: ms epoch }  one per acknowledged keep-alive
//      { type: 'expired', reason }  no keep-alive was acknowledged for longer than the TTL (etcd
//                                   unreachable): the lease can no longer be vouched for. Sent once per
//                                   such episode; the thread keeps trying the same lease (an etcd that
//                                   restarts restores its leases), and `alive` follows if it answers
//      { type: 'gone', reason }     etcd answered TTL 0: the lease is revoked or expired. The thread
//                                   goes idle until the next `start`
//
// Protocol: one LeaseKeepAlive bidi stream, `{ ID }` written every TTL/3; etcd answers each with
// `{ ID, TTL }`. The lease is counted alive until (send time of the last acknowledged keep-alive) +
// TTL, a bound etcd's own expiry can only exceed. A stream that errors, ends or leaves a keep-alive
// unanswered for TTL/3 is replaced (etcd3's pool picks a host, so this fails over between hosts).
//
// The etcd client is tuned for outages as EtcdDiscovery's (src/etcd-client.ts; keep the two alike):
// no circuit breaker per host (etcd3's default refuses calls for 5 s after 3 failures, which would
// delay the first keep-alive after etcd returns), and gRPC reconnect backoff capped at 1 s (grpc-js
// defaults to 120 s, so after a long outage the connection would come back long after etcd).
import { parentPort, workerData } from 'node:worker_threads';
import { Etcd3 } from 'etcd3';

const { hosts, dialTimeoutMs, ttlSeconds } = workerData;
const ttlMs = ttlSeconds * 1000;
const intervalMs = ttlMs / 3;
/** How often the expiry bound is checked, and the retry delay after a failed stream. */
const WATCHDOG_MS = Math.min(250, intervalMs);
const RETRY_MS = Math.min(250, intervalMs);

const describe = (e) => (e instanceof Error ? e.message : String(e));
const passThrough = {
  _altReturn: undefined,
  onSuccess: () => ({ dispose() {} }),
  onFailure: () => ({ dispose() {} }),
  execute: async (fn, signal) => fn({ signal: signal ?? new AbortController().signal }),
};
const client = new Etcd3({
  hosts,
  dialTimeout: dialTimeoutMs,
  grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 1000 },
  faultHandling: { host: () => passThrough },
});

let leaseId = null;
/** Send time (ms) of the last acknowledged keep-alive (first: of the grant). */
let lastOk = 0;
/** `expired` was reported and no keep-alive has been acknowledged since. */
let expired = false;
/** Stopped for good (`stop`), or idle (no lease) until the next `start`. */
let done = false;
let stream = null;
let opening = false;
/** Send times of the keep-alives written on `stream` and not yet answered (answers come in order). */
let pending = [];
let lastError = null;
let sendTimer = null;
let watchdogTimer = null;
let retryTimer = null;

let stopped = false;

parentPort.on('message', (msg) => {
  if (msg.type === 'start' && !stopped) {
    if (leaseId !== null) idle();
    leaseId = msg.leaseId;
    lastOk = msg.grantedAt;
    expired = false;
    lastError = null;
    done = false;
    sendTimer = setInterval(tick, intervalMs);
    watchdogTimer = setInterval(checkExpiry, WATCHDOG_MS);
    openStream();
  } else if (msg.type === 'stop') {
    stopped = true;
    idle();
    client.close();
    parentPort.close();
  }
});

function checkExpiry() {
  if (done || expired) return;
  const since = Date.now() - lastOk;
  if (since > ttlMs) {
    expired = true;
    const why = lastError ? `: ${describe(lastError)}` : '';
    parentPort.postMessage({ type: 'expired', reason: `no keep-alive acknowledged for ${since} ms (TTL ${ttlSeconds} s)${why}` });
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
    const reason = `etcd reports lease ${leaseId} gone (keep-alive answered TTL ${res.TTL}): revoked or expired`;
    idle();
    parentPort.postMessage({ type: 'gone', reason });
    return;
  }
  lastOk = Math.max(lastOk, sentAt);
  expired = false;
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

/** Stop keeping the current lease (timers, stream); a later `start` begins again. */
function idle() {
  leaseId = null;
  done = true;
  clearInterval(sendTimer);
  clearInterval(watchdogTimer);
  clearTimeout(retryTimer);
  retryTimer = null;
  dropStream();
}
