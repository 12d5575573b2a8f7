/**
 * ClusterEngine: the InferenceEngine the front doors (KServe HTTP/gRPC, OpenAI) serve on a router.
 * Nothing runs here: metadata, readiness and configuration come from the workers' model cards in the
 * registry, tensor requests are forwarded to one worker's `infer` endpoint, and LLMs are served by
 * RoutedLlmEndpoints (KV-aware routing, migration).
 *
 * Departures from a worker's engine, on purpose:
 * - model control (load/unload) is refused `unsupported`: models are loaded on workers, which register
 *   them in discovery; the router only follows;
 * - statistics (`modelStatistics`) are the sum over the instances serving each model and version,
 *   asked over their `stats` endpoint at request time (statistics-sum.ts); an instance that does not
 *   answer within STATS_TIMEOUT_MS is left out (a lower bound, logged). `metricsSnapshot` stays
 *   empty: the metrics port is scraped often, each worker serves its own per-model families, and a
 *   round trip to every worker per scrape would cost more than it tells;
 * - classification labels come from the model cards (each READY version's labels, read by the worker
 *   at load); labels too big for a card (MAX_CARD_LABEL_BYTES) are left off it, and the router then
 *   answers classification outputs without labels;
 * - `model_repository(unload_dependents)` is not advertised (no model control here).
 *
 * Server metadata is the worker's (`triton`, engine DEFAULT_SERVER_VERSION unless `serverVersion`):
 * clients and Triton's own tests check the name.
 *
 * Tensor requests pick, among the instances serving the model (and the requested version), the one
 * with the fewest requests this router has in flight to it (ties: random). Every path that picks an
 * instance for a whole request skips prefill-role instances (disaggregation: they run only the
 * prefill half of a generation, RoutedLlmEndpoint's business); a model served only by prefill
 * workers fails `unavailable` saying so.
 *
 * WORKER DEATH. An attempt fails because of its instance when the request reached nobody
 * (NoRespondersError), its stream stopped without the final marker (StreamIncompleteError), the
 * worker stopped its endpoint without drain (a `cancelled` error frame the caller did not ask for), or
 * the router aborted it: the instance left discovery and its health probe says dead, or the request
 * was silent for `stallProbeMs` and the probe says dead (stall-watch.ts; a kill -9'ed worker is found
 * within ~stallProbeMs + one probe, far below the lease TTL). The instance is inhibited, then:
 * - a stateless request (no sequence, or a sequence START) with nothing delivered yet is re-sent to
 *   another instance, at most `migrationLimit` times (a request that reached nobody at least once,
 *   migration off or not: nothing ran). Tensor models are functions of their inputs, so running one
 *   twice (the dead worker may have executed it) is harmless; the caller sees one answer.
 * - a START is re-sent too: it carries all the state its sequence has, so the other instance starts
 *   the sequence afresh, and the pin moves there. (Another router replica follows the hash, which may
 *   still name the dead instance until it leaves discovery: its requests then fail as below.)
 * - a later request of a sequence is never re-sent (its state died with the instance): it fails
 *   `unavailable` (HTTP 503, gRPC UNAVAILABLE) "…the worker holding the sequence … failed during the
 *   request; the sequence's state is lost, start it again with the START flag" (or "… is unreachable;
 *   its state cannot move to another worker: retry later, or start the sequence again …"). The pin
 *   stays, so the sequence's next requests fail at once (no responders) until the instance leaves
 *   discovery; from then on they get the worker's answer for an unknown sequence.
 * - a decoupled request whose responses were partly delivered cannot be re-sent without repeating
 *   them: `unavailable`. So is any request past the migration limit or without another instance.
 * Other failures (the worker's own error frames) pass through unchanged.
 *
 * Sequences (a model with `sequence_batching`, a request with a non-zero / non-empty `sequence_id`,
 * integer or string): every request of a sequence goes to one instance (sequence-pins.ts): the
 * rendezvous hash of the id over the instances serving the model/version at START, pinned in this
 * router until END or the model's idle time plus a margin; a request without START and without pin
 * (another replica saw the START, or the pin expired) takes the rendezvous choice too. A pinned
 * instance that left discovery fails the request with the worker's error for an unknown sequence
 * (`pickSequenceInstance` says why).
 *
 * Decoupled streams: an error response in the middle (`{ error, final: false }` on the worker) comes
 * as a WireInferResponse with `error` and is delivered the same way; the stream goes on.
 *
 * KServe requests to an LLM (`generate`, `generate_stream`, ModelInfer / ModelStreamInfer carrying a
 * one-element `text_input` BYTES input) are answered HERE (kserve-llm.ts), as Dynamo's KServe
 * frontend does (it turns `text_input` into a completion request for its own pipeline): the
 * request is normalized against the card's config (the engine's own `normalizeRequest`) and handed
 * to the engine's own `LlmInstance` (the code a worker runs for it: parameters, `sampling_parameters`,
 * `stream`, `exclude_input_in_output`, stop strings, text deltas, usage parameters), whose LlmEndpoint
 * is the model's RoutedLlmEndpoint: routed KV-aware like the OpenAI path (same chooser, decisions,
 * reservations) and sent to the worker's `generate` endpoint as token ids, so a generation whose
 * worker dies MIGRATES with the tokens so far — the client sees one uninterrupted stream (or one
 * final text) of the requested length, every token once. Past the migration limit, or with no other
 * worker, it fails `unavailable` (503 / UNAVAILABLE). The request is counted here as `infer`, not as
 * `generate`. Departure: such requests run on the workers' `generate` endpoint, not through their
 * engine's scheduler, so they do not appear in the workers' Triton statistics (`/stats`), as OpenAI
 * requests do not. A request that does not parse here (prompt missing, not one inline BYTES element,
 * in shared memory, blank; a bad input or parameter) is forwarded unchanged to a worker's `infer`
 * (routed by its prompt when it has one), so its error is the worker's own.
 * A prompt whose byte length proves it cannot fit the context is refused on the router, before
 * tokenizing, with the worker's message (`textPromptTokens`).
 */
import { Cancellation, type CancelSignal, type Logger, SwitchyardError, cancelled, invalidArgument, notFound, toSwitchyardError, unavailable, unsupported } from '@switchyard/common';
import { DEFAULT_EXTENSIONS, DEFAULT_SERVER_NAME, DEFAULT_SERVER_VERSION, type InferenceEngine, inferViaSubmit, type InferResult, type ModelIndexEntry, type ModelMetadata, type ModelMetricsSnapshot, type ModelStatistics, type OutputLabels, type ServerMetadata, type SubmitOptions } from '@switchyard/engine';
import { randomUUID } from 'node:crypto';
import { type InferRequest, type InferResponse, deserializeBytesElements } from '@switchyard/kserve';
import { type LlmEndpoint, textPromptTokens } from '@switchyard/llm';
import { correlationText, inSequence, sequenceOf } from '@switchyard/engine/internal';
import { DEFAULT_MAX_SEQUENCE_IDLE_MICROSECONDS, type ModelConfig, type ModelSequenceBatching, parseModelConfigJson } from '@switchyard/model-config';
import { type InstanceAddress, type InstanceId, type ModelCard, type Payload, type RequestPlane, NoRespondersError, StreamIncompleteError, endpointAddress, instanceAddress } from '@switchyard/runtime';
import { INFER_ENDPOINT, STATS_ENDPOINT, type WireModelStatistics, type WireStatsRequest } from '../protocols.js';
import { decodeWireInferResponse, decodeWireStats, inferErrorFromWire, inferRequestToBinary, inferRequestToWire, inferResponseFromWire, toJson } from '../wire-codec.js';
import { InstanceGoneReason, type InstanceTracker } from './instance-tracker.js';
import type { HeldRequests } from './held-requests.js';
import { type ModelEntry, type ModelRegistry, onlyPrefillWorkers, takesWholeRequests } from './model-registry.js';
import { KServeLlm, type PreparedLlmRequest } from './kserve-llm.js';
import { instanceOf, settlementFailed } from './llm-worker-chooser.js';
import { RoutedLlmEndpoint, type RoutedLlmEndpointDeps } from './routed-llm-endpoint.js';
import { SequencePins, rendezvousInstance, sequencePinKey } from './sequence-pins.js';
import type { RouterStatsRecorder } from './router-stats.js';
import { type StallWatchDeps, watchStall } from './stall-watch.js';
import { sumStatistics } from './statistics-sum.js';

/** A worker's (Triton's) name and version: clients and Triton's own tests check `name == "triton"`. */
export const CLUSTER_SERVER_NAME = DEFAULT_SERVER_NAME;
export const CLUSTER_SERVER_VERSION = DEFAULT_SERVER_VERSION;
/** A worker's extensions minus what a router cannot do (see the file comment). */
export const CLUSTER_EXTENSIONS: readonly string[] = DEFAULT_EXTENSIONS.filter((e) => e !== 'model_repository(unload_dependents)');
const NO_LABELS: OutputLabels = new Map();
/** Times a request is re-routed because its chosen instance left discovery before it was sent. */
const MAX_VANISHED_RETRIES = 3;
/** How long `modelStatistics` waits for each instance's `stats` answer. */
export const STATS_TIMEOUT_MS = 2000;
export const MODEL_CONTROL_UNSUPPORTED = 'model control is done on workers: load or unload the model on a worker, the router follows discovery';

export interface ClusterEngineOptions {
  readonly registry: ModelRegistry;
  readonly requestPlane: RequestPlane;
  readonly tracker: InstanceTracker;
  readonly stats: RouterStatsRecorder;
  /** Everything a RoutedLlmEndpoint needs except its model name. */
  readonly llm: Omit<RoutedLlmEndpointDeps, 'model'>;
  readonly logger: Logger;
  readonly serverVersion?: string;
  /** Uniform [0, 1); default Math.random (ties between equally loaded instances). */
  readonly random?: () => number;
  /** Epoch ms for sequence pin expiry; default Date.now. */
  readonly now?: () => number;
  /**
   * Scale to zero: requests for a known model without a worker wait here for one (held-requests.ts),
   * on every path (KServe infer and generate, gRPC, OpenAI through `waitForModel`). Absent: none wait.
   */
  readonly held?: HeldRequests;
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

export class ClusterEngine implements InferenceEngine {
  private stopping = false;
  private synced = false;
  private readonly endpoints = new Map<string, RoutedLlmEndpoint>();
  /** Parsed configs by card identity: one parse per (model, primary card). */
  private readonly configs = new WeakMap<object, ModelConfig>();
  /** The `infer` address of each card's instance, built (and its names validated) once per card, not per request. */
  private readonly inferTargets = new WeakMap<ModelCard, InstanceAddress>();
  /** Labels by the card's decoded labels object: one Map per (card, version). */
  private readonly labels = new WeakMap<object, OutputLabels>();
  private readonly random: () => number;
  private readonly pins: SequencePins;
  private readonly stallDeps: StallWatchDeps;
  private readonly kserveLlm: KServeLlm;

  constructor(private readonly options: ClusterEngineOptions) {
    this.random = options.random ?? Math.random;
    const { prober, options: routing, tracker, stats, logger } = options.llm;
    this.stallDeps = { prober, stallProbeMs: routing.stallProbeMs, tracker, stats, logger };
    this.kserveLlm = new KServeLlm({ stats, logger });
    this.pins = new SequencePins(options.now);
    void options.registry.ready().then(() => (this.synced = true));
  }

  isLive(): boolean {
    return true;
  }

  /** Ready once the registry has synced with discovery, until shutdown. */
  isReady(): boolean {
    return !this.stopping && this.synced;
  }

  serverMetadata(): ServerMetadata {
    return { name: CLUSTER_SERVER_NAME, version: this.options.serverVersion ?? CLUSTER_SERVER_VERSION, extensions: [...CLUSTER_EXTENSIONS] };
  }

  /** The model's entry, or the lookup error a Triton worker gives for an unknown model. */
  private resolve(name: string, version?: number): ModelEntry {
    const e = this.options.registry.model(name);
    if (e === undefined) throw invalidArgument(`Request for unknown model: '${name}' is not found`);
    if (version !== undefined && !versionsOf(e).includes(String(version))) {
      throw notFound(`Request for unknown model: '${name}' version ${version} is not found`);
    }
    return e;
  }

  modelMetadata(name: string, version?: number): ModelMetadata {
    const e = this.resolve(name, version);
    const m = e.metadata.modelMetadata as unknown as ModelMetadata;
    return { ...m, name, versions: version !== undefined ? [String(version)] : versionsOf(e) };
  }

  isModelReady(name: string, version?: number): boolean {
    const e = this.options.registry.model(name);
    return e !== undefined && (version === undefined || versionsOf(e).includes(String(version)));
  }

  /** The worker rendered the normalised config to protobuf JSON; parsing it back gives the same object. */
  modelConfig(name: string, version?: number): ModelConfig {
    const e = this.resolve(name, version);
    let config = this.configs.get(e.card);
    if (config === undefined) {
      config = parseModelConfigJson(JSON.stringify(e.metadata.modelConfig));
      this.configs.set(e.card, config);
    }
    return config;
  }

  /**
   * The cluster's statistics: each instance serving the model (every instance, without a name) is
   * asked over its `stats` endpoint, and the answers are summed per (model, version)
   * (`sumStatistics`). An instance that does not answer within STATS_TIMEOUT_MS (gone, overloaded, a
   * worker without the endpoint) is left out and logged: the figures are then a lower bound. A model
   * or version no instance serves fails as on a worker (the engine's invalid_argument messages).
   */
  async modelStatistics(name?: string, version?: number): Promise<ModelStatistics[]> {
    const all = name === undefined || name === '';
    const targets = new Map<InstanceId, ModelCard>();
    if (all) {
      for (const e of this.options.registry.list()) for (const [id, card] of e.instances) if (!targets.has(id)) targets.set(id, card);
    } else {
      const e = this.options.registry.model(name);
      if (e === undefined) throw invalidArgument(`requested model '${name}' is not available`);
      if (version !== undefined && !versionsOf(e).includes(String(version))) {
        throw invalidArgument(`requested model version is not available for model '${name}'`);
      }
      for (const [id, card] of e.instances) if (version === undefined || cardVersions(card.metadata).includes(String(version))) targets.set(id, card);
    }
    const request: WireStatsRequest = { v: 1, model: all ? null : name, version: all ? null : (version ?? null) };
    const answers = await Promise.all([...targets].map(([id, card]) => this.instanceStats(id, card, request)));
    // Without a name, keep only what the registry lists for that instance (a model it has not announced yet is not the cluster's).
    const served = (id: InstanceId, s: WireModelStatistics): boolean => this.options.registry.model(s.name)?.instances.has(id) === true;
    return sumStatistics(answers.flatMap(([id, models]) => (all ? models.filter((s) => served(id, s)) : models)));
  }

  /** One instance's answer of `stats`; none (logged) when it fails or times out. */
  private async instanceStats(id: InstanceId, card: ModelCard, request: WireStatsRequest): Promise<[InstanceId, readonly WireModelStatistics[]]> {
    const target = instanceAddress(endpointAddress(card.namespace, card.component, STATS_ENDPOINT), id);
    try {
      for await (const frame of this.options.requestPlane.request(target, toJson(request), { signal: AbortSignal.timeout(STATS_TIMEOUT_MS) })) {
        return [id, decodeWireStats(frame).models];
      }
      throw unavailable('stats stream ended without an answer');
    } catch (e) {
      this.options.logger.warn({ err: e, instance: id, model: request.model }, 'router: statistics of an instance left out');
      return [id, []];
    }
  }

  /**
   * The labels the card of an instance serving `version` carries (every instance of a version loaded
   * the same model folder). None when no card has them (no label file, or too big for a card).
   */
  classificationLabels(name: string, version: number): OutputLabels {
    const e = this.options.registry.model(name);
    if (e === undefined) return NO_LABELS;
    for (const metadata of e.decoded.values()) {
      const byOutput = metadata.labels?.[String(version)];
      if (byOutput === undefined) continue;
      let labels = this.labels.get(byOutput);
      if (labels === undefined) {
        labels = new Map(Object.entries(byOutput));
        this.labels.set(byOutput, labels);
      }
      return labels;
    }
    return NO_LABELS;
  }

  metricsSnapshot(): ModelMetricsSnapshot[] {
    return [];
  }

  /**
   * `undefined` when `name` has a worker or is unknown (the lookup that follows answers); else a
   * promise that resolves once a worker can take the request, or rejects `unavailable` when none
   * started within the queue timeout, `cancelled` when `signal` aborts (held-requests.ts).
   */
  waitForModel(name: string, signal?: CancelSignal): Promise<void> | undefined {
    if (this.stopping) return undefined; // the request itself is refused 'Server is stopping'
    return this.options.held?.untilServable(name, signal);
  }

  llmEndpoint(name: string): LlmEndpoint | undefined {
    const e = this.options.registry.model(name);
    if (e === undefined || e.kind !== 'llm' || e.text === undefined) return undefined;
    let ep = this.endpoints.get(name);
    if (ep === undefined) {
      ep = new RoutedLlmEndpoint({ ...this.options.llm, model: name }, e);
      this.endpoints.set(name, ep);
    }
    return ep;
  }

  llmEndpoints(): LlmEndpoint[] {
    return this.options.registry
      .list()
      .map((e) => this.llmEndpoint(e.name))
      .filter((ep): ep is LlmEndpoint => ep !== undefined);
  }

  /** Called after every change of the cluster's models (a card added, changed or gone: the registry's changes). */
  onModelChange(listener: () => void): () => void {
    return this.options.registry.onChange(() => listener());
  }

  async repositoryIndex(_readyOnly: boolean): Promise<ModelIndexEntry[]> {
    // Every model the registry knows is served by a live instance, hence READY either way.
    return this.options.registry.list().flatMap((e) => versionsOf(e).map((version): ModelIndexEntry => ({ name: e.name, version, state: 'READY' })));
  }

  async loadModel(): Promise<void> {
    throw unsupported(MODEL_CONTROL_UNSUPPORTED);
  }

  async unloadModel(): Promise<void> {
    throw unsupported(MODEL_CONTROL_UNSUPPORTED);
  }

  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions): void {
    const deliver = (result: InferResult): void => {
      try {
        onResult(result);
      } catch (e) {
        this.options.logger.error({ err: e, model: request.modelName }, 'inference result callback threw');
      }
    };
    this.options.stats.request(request.modelName, 'infer');
    void this.forward(request, deliver, options?.signal).catch((e: unknown) => {
      const error = toSwitchyardError(e);
      this.options.stats.error(request.modelName, 'infer', error.code);
      deliver({ final: true, error });
    });
  }

  infer(request: InferRequest, options?: SubmitOptions): Promise<InferResponse> {
    return inferViaSubmit(this, request, options);
  }

  async shutdown(): Promise<void> {
    this.stopping = true;
    this.options.held?.close();
  }

  /**
   * Send to one instance; when that instance fails (see the file comment: reached nobody, died or
   * stalled dead mid-request, stopped its endpoint without drain), re-send to another one when that is
   * safe, else fail `unavailable`. Throws what ends the request.
   */
  private async forward(request: InferRequest, deliver: (r: InferResult) => void, signal: CancelSignal | undefined): Promise<void> {
    if (this.stopping) throw unavailable('Server is stopping');
    const held = this.options.held?.untilServable(request.modelName, signal);
    if (held !== undefined) await held;
    const entry = this.resolve(request.modelName, request.modelVersion);
    if (signal?.aborted === true) throw cancelled('Request was cancelled');
    const here = this.llmHere(entry, request);
    if (here !== undefined) return this.kserveLlm.serve(here, request, deliver, signal);
    const decoupled = entry.metadata.decoupled;
    // Only an LLM's request waits for its prompt (tokenizing may go to a thread): a tensor request is
    // sent in the same turn it arrived, as before.
    const llm = entry.kind === 'llm' ? await this.llmRoute(entry, request) : undefined;
    // Raw tensors for workers that take them (their card says so), base64 JSON for older ones; each
    // built once, on the first attempt that needs it.
    let binaryPayload: Payload | undefined;
    let jsonPayload: Payload | undefined;
    const payloadFor = (id: InstanceId): Payload =>
      entry.decoded.get(id)?.binaryTensors === true ? (binaryPayload ??= inferRequestToBinary(request)) : (jsonPayload ??= toJson(inferRequestToWire(request)));
    const tried = new Set<InstanceId>();
    const sequence = llm === undefined ? this.sequenceRoute(entry, request) : undefined;
    const { migrationLimit } = this.options.llm.options;
    let resends = 0;
    for (let attempt = 0; ; attempt++) {
      let instance: InstanceId | undefined;
      let reservationId: string | undefined;
      if (llm !== undefined) {
        reservationId = `${request.id === '' ? 'kserve' : request.id}:${randomUUID()}`;
        const version = request.modelVersion;
        const exclude = (id: InstanceId): boolean => {
          if (tried.has(id)) return true;
          const card = entry.instances.get(id);
          return version !== undefined && (card === undefined || !cardVersions(card.metadata).includes(String(version)));
        };
        instance = instanceOf((await llm.endpoint.chooseWorker(llm.tokens, reservationId, exclude)).worker);
      } else if (sequence !== undefined) {
        instance = this.pickSequenceInstance(entry, request.modelVersion, sequence, tried);
        if (sequence.end) this.pins.drop(sequence.key);
        else this.pins.pin(sequence.key, instance, sequence.idleMs);
      } else {
        instance = this.pickInstance(entry, request.modelVersion, tried);
        if (instance === undefined) {
          if (![...entry.instances.keys()].some((id) => takesWholeRequests(entry, id))) throw onlyPrefillWorkers(entry);
          if (resends > 0) throw unavailable(`no other worker available for model '${entry.name}' to re-send the request to (every instance that serves it failed)`);
          throw unavailable(`no worker available for model '${entry.name}'`);
        }
      }
      tried.add(instance);
      const card = entry.instances.get(instance);
      if (card === undefined) {
        // it left discovery while the (asynchronous) LLM choice was being made: choose again
        if (reservationId !== undefined) {
          void this.options.llm.table.release(reservationId).catch(settlementFailed(this.options.logger, 'release'));
        }
        if (attempt < MAX_VANISHED_RETRIES) continue;
        throw unavailable(`no worker available for model '${entry.name}' (instances kept leaving the cluster)`);
      }
      const target = this.inferTarget(card, instance);
      const abort = new Cancellation();
      const onAbort = (): void => abort.abort(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const untrack = this.options.tracker.track(instance, entry.name, abort);
      const stall = watchStall(this.stallDeps, instance, abort, request.id);
      let held: InferResponse | undefined;
      let received = 0;
      let delivered = 0;
      try {
        let finalDelivered = false;
        for await (const frame of this.options.requestPlane.request(target, payloadFor(instance), { signal: abort.signal })) {
          stall.frame();
          if (received === 0 && reservationId !== undefined) {
            void this.options.llm.table.markPrefillDone(reservationId).catch(settlementFailed(this.options.logger, 'markPrefillDone'));
          }
          const wire = decodeWireInferResponse(frame);
          received++;
          const error = inferErrorFromWire(wire);
          if (error !== undefined) {
            // A decoupled stream's error response: delivered as the worker's engine delivered it, the
            // stream goes on. Only decoupled models send one; any other model cannot, so it ends the request.
            if (!decoupled) throw error;
            delivered++;
            deliver({ error, final: false });
            continue;
          }
          const response = inferResponseFromWire(wire);
          if (decoupled) {
            // The worker marks the response the engine sent as final; otherwise the final flag
            // comes alone when the stream ends (as the worker's engine delivered it).
            finalDelivered = wire.final === true;
            delivered++;
            deliver({ response, final: finalDelivered });
          } else {
            if (held !== undefined) deliver({ response: held, final: false });
            held = response;
          }
        }
        if (decoupled) {
          if (!finalDelivered) deliver({ final: true });
        } else deliver(held !== undefined ? { response: held, final: true } : { final: true });
        return;
      } catch (e) {
        if (aborted(signal)) throw cancelled('Request was cancelled', e);
        const failure = this.instanceFailure(e, abort.signal);
        if (failure === undefined) {
          if (e instanceof SwitchyardError) throw e;
          throw unavailable(`request to instance ${instance} failed: ${(e as Error).message}`, e);
        }
        // a stream cut by this router's own NATS outage says nothing against the instance
        if (failure !== 'gone' && !(e instanceof StreamIncompleteError && e.local)) this.options.tracker.inhibit(instance);
        const what = failure === 'unreachable' ? 'is unreachable' : 'failed during the request';
        if (sequence !== undefined && !sequence.start) {
          // Its state was on that instance: nothing to re-send it to. The pin stays: later requests of
          // the sequence fail the same way (no responders) until the instance leaves discovery, then
          // as a sequence without START (pickSequenceInstance). Unreachable is not known dead (a
          // worker's NATS reconnect): its message leaves a retry open.
          const state = failure === 'unreachable' ? 'its state cannot move to another worker: retry later, or start the sequence again with the START flag' : "the sequence's state is lost, start it again with the START flag";
          throw unavailable(`inference request for sequence ${sequence.text} to model '${entry.name}' failed: the worker holding the sequence (instance ${instance}) ${what}; ${state}`, e);
        }
        if (delivered > 0) {
          throw unavailable(`the worker serving the request (instance ${instance}) ${what} after ${delivered} of its responses were delivered; it cannot be re-sent without repeating them`, e);
        }
        // Reached nobody: nothing ran, so once more even with migration off (as ever).
        const limit = failure === 'unreachable' ? Math.max(1, migrationLimit) : migrationLimit;
        if (resends >= limit) {
          throw unavailable(`the worker serving the request (instance ${instance}) ${what}${limit > 0 ? ` and the request was re-sent ${resends} times already (migration limit ${migrationLimit})` : ''}`, e);
        }
        resends++;
        this.options.stats.migrations[failure === 'unreachable' ? 'new_request' : 'ongoing_request']++;
        this.options.logger.warn({ model: entry.name, instance, resends, err: e }, `router: instance ${what}; re-sending the request to another instance`);
      } finally {
        stall.stop();
        signal?.removeEventListener('abort', onAbort);
        untrack();
        if (reservationId !== undefined) {
          void this.options.llm.table.release(reservationId).catch(settlementFailed(this.options.logger, 'release'));
        }
      }
    }
  }

  private inferTarget(card: ModelCard, instance: InstanceId): InstanceAddress {
    let target = this.inferTargets.get(card);
    if (target === undefined || target.instanceId !== instance) {
      target = instanceAddress(endpointAddress(card.namespace, card.component, INFER_ENDPOINT), instance);
      this.inferTargets.set(card, target);
    }
    return target;
  }

  /**
   * Why an attempt failed, when the instance is to blame (the caller did not cancel): `unreachable`
   * (no responders: nothing ran), `gone` (the router aborted it: the instance left discovery dead, or
   * its stall probe found it dead), `died` (the stream stopped without its final marker, or the
   * worker stopped its endpoint without drain: a `cancelled` error frame the caller did not ask for).
   * Undefined: the request's own failure (an error frame), passed through.
   */
  private instanceFailure(e: unknown, attempt: CancelSignal): 'unreachable' | 'gone' | 'died' | undefined {
    if (attempt.aborted && attempt.reason instanceof InstanceGoneReason) return 'gone';
    if (e instanceof NoRespondersError) return 'unreachable';
    if (e instanceof StreamIncompleteError) return 'died';
    if (e instanceof SwitchyardError && e.code === 'cancelled') return 'died';
    return undefined;
  }

  /** A KServe request to an LLM the router answers itself (kserve-llm.ts), or undefined: forward it. */
  private llmHere(entry: ModelEntry, request: InferRequest): PreparedLlmRequest | undefined {
    if (entry.kind !== 'llm' || entry.text === undefined || entry.llm === undefined) return undefined;
    const endpoint = this.llmEndpoint(entry.name) as RoutedLlmEndpoint | undefined;
    const version = request.modelVersion !== undefined ? String(request.modelVersion) : versionsOf(entry).at(-1);
    if (endpoint === undefined || version === undefined) return undefined;
    let config: ModelConfig;
    try {
      config = this.modelConfig(entry.name, request.modelVersion);
    } catch {
      return undefined;
    }
    return this.kserveLlm.prepare({ endpoint, engine: entry.llm.engine, config, version }, request);
  }

  /**
   * For a KServe request to an LLM: its routed endpoint and the prompt tokenized as the worker's
   * LlmInstance will (`text_input`, one BYTES element, UTF-8 with replacement, special tokens added).
   * Undefined when the model is not a routable LLM or the prompt cannot be read here.
   */
  private async llmRoute(entry: ModelEntry, request: InferRequest): Promise<{ endpoint: RoutedLlmEndpoint; tokens: readonly number[] } | undefined> {
    if (entry.kind !== 'llm' || entry.text === undefined || entry.llm === undefined) return undefined;
    const input = request.inputs.find((i) => i.name === 'text_input');
    if (input === undefined || input.datatype !== 'BYTES' || input.parameters['shared_memory_region'] !== undefined) return undefined;
    let elements: Uint8Array[];
    try {
      elements = deserializeBytesElements(input.data, input.name);
    } catch {
      return undefined;
    }
    if (elements.length !== 1) return undefined;
    const endpoint = this.llmEndpoint(entry.name) as RoutedLlmEndpoint | undefined;
    if (endpoint === undefined) return undefined;
    // A prompt that provably cannot fit is refused here with the worker's message, never forwarded.
    const tokens = await textPromptTokens(endpoint, utf8.decode(elements[0]), true);
    return tokens.length > 0 ? { endpoint, tokens } : undefined;
  }

  /** The request's sequence when the model has sequence batching and the request a non-zero / non-empty id. */
  private sequenceRoute(entry: ModelEntry, request: InferRequest): RoutedSequence | undefined {
    const batching = this.modelConfig(entry.name).sequence_batching as ModelSequenceBatching | undefined;
    if (batching === undefined) return undefined;
    const s = sequenceOf(request);
    if (!inSequence(s.id)) return undefined;
    const idleUs = Number(batching.max_sequence_idle_microseconds) || DEFAULT_MAX_SEQUENCE_IDLE_MICROSECONDS;
    return { key: sequencePinKey(entry.name, s.key), text: correlationText(s.id), start: s.start, end: s.end, idleMs: idleUs / 1000 };
  }

  /**
   * The instance of a sequence: its pin, unless the request STARTs the sequence; else the rendezvous
   * choice among instances serving `version` (not tried). Inhibition is ignored on purpose: every
   * router replica must choose alike. A pinned instance that left discovery (or no longer serves the
   * version) fails the request with the worker's own error for a sequence it does not know
   * (invalid_argument "must specify the START flag …"): that is what Triton answers once a sequence's
   * state is gone (idle timeout, server restart), and the client's remedy is the same, restart the
   * sequence. Sending it elsewhere would at best get that error from another worker, at worst run it
   * against a state that never saw its beginning.
   */
  private pickSequenceInstance(entry: ModelEntry, version: number | undefined, sequence: RoutedSequence, tried: ReadonlySet<InstanceId>): InstanceId {
    const serves = (id: InstanceId): boolean => {
      const card = entry.instances.get(id);
      return card !== undefined && takesWholeRequests(entry, id) && (version === undefined || cardVersions(card.metadata).includes(String(version)));
    };
    if (!sequence.start) {
      const pinned = this.pins.get(sequence.key);
      if (pinned !== undefined) {
        if (serves(pinned) && !tried.has(pinned)) return pinned;
        this.pins.drop(sequence.key);
        throw invalidArgument(
          `inference request for sequence ${sequence.text} to model '${entry.name}' must specify the START flag on the first request of the sequence`,
        );
      }
    }
    const chosen = rendezvousInstance(
      sequence.key,
      [...entry.instances.keys()].filter((id) => serves(id) && !tried.has(id)),
    );
    if (chosen === undefined) throw unavailable(`no worker available for model '${entry.name}'`);
    return chosen;
  }

  /** Least in-flight (router-local) among instances serving `version` that take whole requests (not prefill-role), not tried, not inhibited unless all are; ties random. */
  private pickInstance(entry: ModelEntry, version: number | undefined, tried: ReadonlySet<InstanceId>): InstanceId | undefined {
    const tracker = this.options.tracker;
    // (one pass, no intermediate arrays: this runs on every tensor request)
    const wanted = version === undefined ? undefined : String(version);
    const usable: InstanceId[] = [];
    for (const [id, card] of entry.instances) {
      if (!tried.has(id) && takesWholeRequests(entry, id) && (wanted === undefined || cardVersions(card.metadata).includes(wanted))) usable.push(id);
    }
    if (usable.length === 1) return usable[0]; // inhibited or not, it is the only choice
    let best: InstanceId[] = [];
    let bestCount = Infinity;
    for (const id of tracker.preferUninhibited(usable)) {
      const n = tracker.inflightCount(id, entry.name);
      if (n < bestCount) {
        bestCount = n;
        best = [id];
      } else if (n === bestCount) best.push(id);
    }
    if (best.length === 0) return undefined;
    return best[Math.floor(this.random() * best.length) % best.length];
  }
}

/** A request of a sequence, as the router routes it (sequence-pins.ts). */
interface RoutedSequence {
  /** `sequencePinKey(model, kind-qualified id)`. */
  readonly key: string;
  /** The id as Triton prints it. */
  readonly text: string;
  readonly start: boolean;
  readonly end: boolean;
  /** The model's `max_sequence_idle_microseconds`, in ms. */
  readonly idleMs: number;
}

/** Read through a call so TypeScript does not keep a narrowing from before an await. */
function aborted(signal: CancelSignal | undefined): boolean {
  return signal?.aborted === true;
}

/** READY versions over every instance of the model, ascending. */
function versionsOf(e: ModelEntry): string[] {
  const all = new Set<string>();
  for (const card of e.instances.values()) for (const v of cardVersions(card.metadata)) all.add(v);
  return [...all].sort((a, b) => Number(a) - Number(b));
}

function cardVersions(metadata: { readonly [k: string]: unknown }): readonly string[] {
  const v = metadata['versions'];
  return Array.isArray(v) ? (v.filter((x) => typeof x === 'string') as string[]) : [];
}
