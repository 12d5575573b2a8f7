/**
 * HealthProber: is a worker instance alive? One request to its `health` endpoint (protocols.ts), which
 * a worker serves from start until its process closes, draining included.
 *
 * - an answer → 'serving' or 'draining' (the worker is up: its streams will end on their own);
 * - no responders, no answer within `timeoutMs`, a broken stream → 'dead' (abort its streams and
 *   migrate them now rather than after an idle timeout or the lease TTL).
 *
 * Probes of one instance share one request while it is in flight (a worker leaving discovery removes
 * one card per model, and every silent stream to it probes).
 */
import type { Logger } from '@switchyard/common';
import { type InstanceId, type Namespace, type RequestPlane, componentName, endpointAddress, instanceAddress } from '@switchyard/runtime';
import { HEALTH_ENDPOINT, WORKER_COMPONENT } from '../protocols.js';

/** How long a probe waits for the answer before calling the instance dead. */
export const DEFAULT_PROBE_TIMEOUT_MS = 1000;

export type InstanceHealth = 'serving' | 'draining' | 'dead';

export class HealthProber {
  private readonly inflight = new Map<InstanceId, Promise<InstanceHealth>>();

  constructor(
    private readonly requestPlane: RequestPlane,
    private readonly namespace: Namespace,
    private readonly timeoutMs: number = DEFAULT_PROBE_TIMEOUT_MS,
    private readonly logger?: Logger,
  ) {}

  probe(id: InstanceId): Promise<InstanceHealth> {
    let p = this.inflight.get(id);
    if (p === undefined) {
      p = this.run(id).finally(() => this.inflight.delete(id));
      this.inflight.set(id, p);
    }
    return p;
  }

  private async run(id: InstanceId): Promise<InstanceHealth> {
    const target = instanceAddress(endpointAddress(this.namespace, componentName(WORKER_COMPONENT), HEALTH_ENDPOINT), id);
    try {
      let health: InstanceHealth = 'dead'; // a final marker without an answer: not a health endpoint we know
      // read to the final marker (breaking out early would broadcast a cancel)
      for await (const payload of this.requestPlane.request(target, { v: 1 }, { timeoutMs: this.timeoutMs })) {
        health = (payload as { state?: unknown } | null)?.state === 'draining' ? 'draining' : 'serving';
      }
      return health;
    } catch (err) {
      this.logger?.debug({ err, instance: id }, 'router: health probe failed');
      return 'dead';
    }
  }
}
