/**
 * One way to open a NATS connection for a long-running cluster process, shared by the request plane
 * and the event plane.
 *
 * - **Reconnect forever.** nats.js gives up after 10 attempts (≈ 20 s) by default and closes the
 *   connection for good; a worker would then sit in discovery unable to serve (a ghost). Here the
 *   client keeps trying every `DEFAULT_NATS_RECONNECT_WAIT_MS` for as long as the process lives.
 * - **Nothing published while disconnected arrives.** nats.js discards its outbound buffer when it
 *   reconnects (`prepare()` → `resetOutbound()`), so a message published during an outage is lost
 *   without an error. `watchNatsConnection` tells the owner when the connection drops and when it is
 *   back, so it can fail what was in flight and hold what it would send (nats-request-plane.ts).
 */
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/nats-core';
import { type Logger, unavailable } from '@switchyard/common';

/** Wait between reconnect attempts (nats.js's default is 2 s; on a LAN 1 s halves the outage). */
export const DEFAULT_NATS_RECONNECT_WAIT_MS = 1000;

export interface NatsConnectOptions {
  /** `nats://host:port` (or several, comma separated). */
  readonly url: string;
  /** Connection name shown by the server (monitoring). */
  readonly name: string;
}

/** Connect (first attempt must succeed: `unavailable` otherwise), then reconnect forever. */
export async function connectNats({ url, name }: NatsConnectOptions): Promise<NatsConnection> {
  try {
    return await connect({
      servers: url.split(','),
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: DEFAULT_NATS_RECONNECT_WAIT_MS,
    });
  } catch (e) {
    throw unavailable(`cannot connect to NATS at ${url}: ${(e as Error).message}`, e);
  }
}

/**
 * True when the bytes of `nc` (opened on `url`) are encrypted: a `tls://` or `wss://` server URL, or
 * a server that requires TLS (nats.js then upgrades a `nats://` connection by itself).
 */
export function natsConnectionEncrypted(nc: NatsConnection, url: string): boolean {
  return nc.info?.tls_required === true || url.split(',').some((u) => /^\s*(tls|wss):/i.test(u));
}

export interface NatsConnectionWatcher {
  /** The socket dropped: anything published from now until `onReconnect` is lost. */
  onDisconnect?(): void;
  /** Connected again, subscriptions restored. */
  onReconnect?(): void;
}

/**
 * Follow `nc`'s status until it closes: calls `watcher` on disconnect and reconnect, logs both
 * (warn / info) under `log`. Each call has its own status iterator, so several owners of one
 * connection can watch it. Returns a function that stops watching.
 */
export function watchNatsConnection(nc: NatsConnection, log: Logger, watcher: NatsConnectionWatcher): () => void {
  const status = nc.status();
  void (async () => {
    let since = 0;
    for await (const s of status) {
      if (s.type === 'disconnect') {
        since = Date.now();
        log.warn({ server: s.server }, 'NATS connection lost; reconnecting');
        watcher.onDisconnect?.();
      } else if (s.type === 'reconnect') {
        log.info({ server: s.server, downMs: Date.now() - since }, 'NATS connection restored');
        watcher.onReconnect?.();
      }
    }
  })().catch((e: unknown) => log.debug({ err: (e as Error).message }, 'NATS status watch ended'));
  return () => (status as { stop?: () => void }).stop?.();
}
