/**
 * `ReplicaLoads`: the load of a local replica as the event plane last reported it, for the local
 * connector's drain choice (`loadOf`: the least loaded replica is drained first).
 *
 * A replica is a process with the ports its template gave it; a load sample names a cluster
 * instance. The link is the KV transfer address each LLM worker advertises in its model card
 * (`kvTransfer.address`, `host:port`): a replica whose template holds `{kv_transfer_port}` is the
 * instance whose card's port is that port. A port no card (or more than one card: workers on other
 * hosts) advertises gives no load: the connector then treats the replica's load as unknown and
 * drains the replicas with a known load first (a template without `{kv_transfer_port}` never
 * matches). The load is the instance's latest sample's running + waiting sequences.
 *
 * Fed by a discovery watch of the model's cards and by every interval's observations
 * (`observe`, called by `ObservedSource` right after `collect`).
 */
import { type Logger, pauseUnlessAborted, silentLogger } from '@switchyard/common';
import { decodeLlmCardMetadata } from '@switchyard/cluster';
import { POOLS, type LoadSample, type ObservationSource, type Observations } from '@switchyard/planner';
import { decodeModelCard, modelsPrefix, namespace as toNamespace, parseKey, type Discovery, type LocalReplica } from '@switchyard/runtime';

/** A failed watch is started again after this long. */
const RETRY_MS = 1000;

/** The port of a `host:port` / `[v6]:port` address; undefined when there is none. */
export function portOf(address: string): number | undefined {
  const m = /:(\d{1,5})$/.exec(address);
  const port = m === null ? NaN : Number(m[1]);
  return port >= 1 && port <= 65535 ? port : undefined;
}

export class ReplicaLoads {
  /** instance id → its card's KV transfer port. */
  private readonly ports = new Map<string, number>();
  /** instance id → its latest load sample. */
  private readonly loads = new Map<string, LoadSample>();
  private readonly abort = new AbortController();
  private readonly loop: Promise<void>;

  constructor(
    private readonly discovery: Discovery,
    private readonly ns: string,
    private readonly model: string,
    private readonly logger: Logger = silentLogger,
  ) {
    this.loop = this.keepWatching();
  }

  /** Keeps the latest sample of every instance the observations mention. */
  observe(obs: Observations): void {
    for (const pool of POOLS) {
      for (const s of obs.pools[pool]?.load ?? []) {
        const seen = this.loads.get(s.instanceId);
        if (this.ports.has(s.instanceId) && (seen === undefined || seen.ts <= s.ts)) this.loads.set(s.instanceId, s);
      }
    }
  }

  /** See the module comment: running + waiting sequences of the replica's instance, or undefined. */
  loadOf(replica: Pick<LocalReplica, 'ports'>): number | undefined {
    const port = replica.ports.kv_transfer_port;
    if (port === undefined) return undefined;
    const matches = [...this.ports].filter(([, p]) => p === port);
    if (matches.length !== 1) return undefined;
    const sample = this.loads.get(matches[0]![0]);
    return sample === undefined ? undefined : sample.numRunning + sample.numWaiting;
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private async keepWatching(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        await this.watch(signal);
      } catch (err) {
        if (!signal.aborted) this.logger.warn({ err }, 'planner: model card watch failed (replica loads); retrying');
      }
      if (signal.aborted) return;
      await pauseUnlessAborted(RETRY_MS, signal);
    }
  }

  private async watch(signal: AbortSignal): Promise<void> {
    for await (const ev of this.discovery.watch(modelsPrefix(toNamespace(this.ns)), signal)) {
      if (ev.type === 'synced') continue;
      const key = parseKey(ev.key);
      if (key === null || key.kind !== 'model' || key.model !== this.model) continue;
      const id = key.instanceId as string;
      let port: number | undefined;
      if (ev.type === 'put') {
        try {
          const card = decodeModelCard(ev.value);
          const address = card.kind === 'llm' ? decodeLlmCardMetadata(card.metadata).kvTransfer?.address : undefined;
          port = address === undefined ? undefined : portOf(address);
        } catch {
          port = undefined; // the observation source counts invalid cards
        }
      }
      if (port === undefined) {
        this.ports.delete(id);
        this.loads.delete(id);
      } else {
        this.ports.set(id, port);
      }
    }
  }
}

/** An observation source that shows each interval's observations to `ReplicaLoads` and owns what it was built on. */
export class ObservedSource implements ObservationSource {
  constructor(
    private readonly source: ObservationSource,
    private readonly loads: ReplicaLoads | undefined,
    /** Closed after the source, in order (the roles the source was built on). */
    private readonly owned: ReadonlyArray<{ close(): Promise<void> }>,
  ) {}

  collect(): Observations {
    const obs = this.source.collect();
    this.loads?.observe(obs);
    return obs;
  }

  /** Closes the source, the loads, then the owned roles, each even if one before it failed (the first failure is rethrown). */
  async close(): Promise<void> {
    let failure: { err: unknown } | undefined;
    for (const c of [this.source, ...(this.loads === undefined ? [] : [this.loads]), ...this.owned]) {
      try {
        await c.close();
      } catch (err) {
        failure ??= { err };
      }
    }
    if (failure !== undefined) throw failure.err;
  }
}
