/**
 * ModelRegistry: the router's view of which worker instances serve which model, fed by one Discovery
 * watch over the namespace's model cards (`modelsPrefix(ns)`).
 *
 * An instance serves a model from the moment its card is put until the card is deleted (the worker
 * unregistered the model, or its lease expired and etcd dropped every key of the process at once).
 *
 * For an LLM the registry also holds the router-side tokenizer and chat template, built from the
 * card's tokenizer source: inline files (`tokenizer.json`, `tokenizer_config.json`, `config.json`,
 * optionally `chat_template.jinja`) or a `ref` whose uri is an absolute path to a model folder every
 * router can read (`/models/qwen` or `file:///models/qwen`). They are built once per distinct
 * source (cached by a content hash), not once per instance: a hundred workers of one model share one
 * tokenizer. A card whose tokenizer cannot be built is logged and ignored (the instance is not used).
 *
 * Resync after a discovery outage: an instance whose card is missing from the fresh snapshot (a
 * `delete` marked `resync`) is removed only after `resyncGraceMs` (default DEFAULT_RESYNC_GRACE_MS),
 * unless its card is put again meanwhile. When etcd comes back without its data, every card is
 * missing from the first snapshot, and the workers register again (same instance ids) within a
 * second or so: without the grace the router would drop every model and answer 404 in between.
 * A worker that really left during the outage is removed a few seconds later; requests that reach it
 * meanwhile find no responders and are retried on another instance, as for any dead worker. A card
 * put again unchanged during the grace changes nothing (no `instance-added`: its routing state stays).
 *
 * Concurrency: watch events are applied one at a time in revision order; a tokenizer build is awaited
 * inside that loop, so `instance-added` is emitted only once the model can be served, and a delete
 * that follows a put is never applied before it. Listeners run synchronously inside the loop.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { isAbsolute } from 'node:path';
import { type Logger, type SwitchyardError, invalidArgument, silentLogger, unavailable, unsupported } from '@switchyard/common';
import {
  ChatTemplate,
  Tokenizer,
  type ModelConfigJson,
  type TokenizerConfigJson,
  type TokenizerJson,
  readModelFolder,
} from '@switchyard/llm';
import {
  type Discovery,
  type InstanceId,
  type ModelCard,
  type Namespace,
  type TokenizerSource,
  decodeModelCard,
  modelsPrefix,
  parseKey,
} from '@switchyard/runtime';
import type { LlmCardMetadata, TensorCardMetadata, WorkerRole } from '../protocols.js';
import { decodeLlmCardMetadata, decodeTensorCardMetadata, roleOf } from '../wire-codec.js';

/** A model's router-side text processing (LLMs only). */
export interface LlmTextTools {
  readonly tokenizer: Tokenizer;
  /** undefined when the model has no chat template (chat completions are refused). */
  readonly chatTemplate: ChatTemplate | undefined;
}

/** One model as the router sees it. */
export interface ModelEntry {
  readonly name: string;
  readonly kind: 'llm' | 'tensor';
  /** Instances serving it (never empty: a model without instances is removed), in arrival order. */
  readonly instances: ReadonlyMap<InstanceId, ModelCard>;
  /** The card model-wide settings are read from: the oldest instance's. */
  readonly card: ModelCard;
  /** `card`'s metadata, decoded (KServe metadata and config as the worker rendered them). */
  readonly metadata: TensorCardMetadata;
  /** `card`'s LLM metadata (kind 'llm' only). */
  readonly llm?: LlmCardMetadata;
  /** Decoded metadata of every instance's card (what differs per instance: versions, labels). */
  readonly decoded: ReadonlyMap<InstanceId, TensorCardMetadata | LlmCardMetadata>;
  /** LLMs only. */
  readonly text?: LlmTextTools;
}

/** What changed; emitted after the registry's state reflects it. */
export type RegistryChange =
  | { readonly type: 'instance-added'; readonly model: string; readonly instanceId: InstanceId; readonly card: ModelCard }
  | { readonly type: 'instance-removed'; readonly model: string; readonly instanceId: InstanceId; readonly card: ModelCard }
  /** The view equals discovery's (after the initial snapshot, and again after a watch resync). */
  | { readonly type: 'synced' };

export type RegistryListener = (change: RegistryChange) => void;

/** How long an instance missing from a resync snapshot stays before it is removed. */
export const DEFAULT_RESYNC_GRACE_MS = 3000;

export interface ModelRegistryOptions {
  readonly discovery: Discovery;
  readonly namespace: Namespace;
  readonly logger?: Logger;
  /** Default DEFAULT_RESYNC_GRACE_MS; 0 removes at once. */
  readonly resyncGraceMs?: number;
}

interface MutableEntry {
  name: string;
  kind: 'llm' | 'tensor';
  instances: Map<InstanceId, ModelCard>;
  /** Decoded metadata of every instance's card. */
  decoded: Map<InstanceId, TensorCardMetadata | LlmCardMetadata>;
  card: ModelCard;
  metadata: TensorCardMetadata;
  llm?: LlmCardMetadata;
  text?: LlmTextTools;
}

export class ModelRegistry {
  private readonly models = new Map<string, MutableEntry>();
  private readonly listeners = new Set<RegistryListener>();
  /** content hash → tools (a rejected build is removed so a fixed card can retry). */
  private readonly textCache = new Map<string, Promise<LlmTextTools>>();
  private readonly abort = new AbortController();
  private readonly logger: Logger;
  private readonly loop: Promise<void>;
  private resolveReady!: () => void;
  private readonly readyPromise = new Promise<void>((resolve) => (this.resolveReady = resolve));
  private tokenizerBuilds = 0;
  private rejectedCards = 0;
  /** Watch key → timer of a removal held back after a resync. */
  private readonly pendingRemovals = new Map<string, NodeJS.Timeout>();
  /** Watch key → JSON text of the card last put there (to tell a card put back unchanged). */
  private readonly cardTexts = new Map<string, string>();

  constructor(private readonly options: ModelRegistryOptions) {
    this.logger = options.logger ?? silentLogger;
    this.loop = this.run();
  }

  /** Resolves after the first `synced`: from then on the view is discovery's. */
  ready(): Promise<void> {
    return this.readyPromise;
  }

  /** Subscribe to changes; returns unsubscribe. Called synchronously after each change is applied. */
  onChange(listener: RegistryListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  model(name: string): ModelEntry | undefined {
    return this.models.get(name);
  }

  /** Every model with at least one instance, sorted by name. */
  list(): ModelEntry[] {
    return [...this.models.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Tokenizers actually built (not served from the cache), and cards ignored as unusable. */
  counters(): { readonly tokenizerBuilds: number; readonly rejectedCards: number } {
    return { tokenizerBuilds: this.tokenizerBuilds, rejectedCards: this.rejectedCards };
  }

  /** Stop watching. Idempotent. */
  async close(): Promise<void> {
    this.abort.abort();
    await this.loop;
    for (const t of this.pendingRemovals.values()) clearTimeout(t);
    this.pendingRemovals.clear();
  }

  private async run(): Promise<void> {
    const prefix = modelsPrefix(this.options.namespace);
    try {
      for await (const ev of this.options.discovery.watch(prefix, this.abort.signal)) {
        if (ev.type === 'synced') {
          this.resolveReady();
          this.emit({ type: 'synced' });
          continue;
        }
        const parsed = parseKey(ev.key);
        if (parsed === null || parsed.kind !== 'model') continue;
        const graceMs = this.options.resyncGraceMs ?? DEFAULT_RESYNC_GRACE_MS;
        if (ev.type === 'delete' && ev.resync === true && graceMs > 0) {
          this.deferRemoval(ev.key, parsed.model, parsed.instanceId, graceMs);
          continue;
        }
        const pending = this.cancelRemoval(ev.key);
        if (ev.type === 'delete') {
          this.cardTexts.delete(ev.key);
          this.remove(parsed.model, parsed.instanceId);
          continue;
        }
        const text = JSON.stringify(ev.value);
        const unchanged = this.cardTexts.get(ev.key) === text && this.models.get(parsed.model)?.instances.has(parsed.instanceId) === true;
        this.cardTexts.set(ev.key, text);
        if (pending && unchanged) continue; // back unchanged after a resync: nothing moves
        await this.put(ev.key, ev.value, parsed.model, parsed.instanceId);
      }
    } catch (e) {
      if (!this.abort.signal.aborted) this.logger.error({ err: e }, 'model registry: discovery watch failed');
    }
  }

  private async put(key: string, value: unknown, model: string, id: InstanceId): Promise<void> {
    let card: ModelCard;
    let metadata: TensorCardMetadata | LlmCardMetadata;
    try {
      card = decodeModelCard(value);
      if (card.model !== model || card.instanceId !== id) throw invalidArgument(`model card at '${key}' names ${card.model}/${card.instanceId}`);
      metadata = card.kind === 'llm' ? decodeLlmCardMetadata(card.metadata) : decodeTensorCardMetadata(card.metadata);
    } catch (e) {
      this.rejectedCards++;
      this.logger.warn({ err: e, key }, 'model registry: ignoring an invalid model card');
      return;
    }
    const existing = this.models.get(model);
    if (existing !== undefined && existing.kind !== card.kind) {
      this.rejectedCards++;
      this.logger.warn({ model, instanceId: id, kind: card.kind, servedAs: existing.kind }, 'model registry: ignoring a card whose kind differs from the served one');
      return;
    }
    let text: LlmTextTools | undefined;
    if (card.kind === 'llm') {
      try {
        text = await this.textTools(card);
      } catch (e) {
        this.rejectedCards++;
        this.logger.error({ err: e, model, instanceId: id }, 'model registry: cannot build the tokenizer; instance ignored');
        return;
      }
    }
    const entry = this.models.get(model);
    if (entry === undefined) {
      const created: MutableEntry = { name: model, kind: card.kind, instances: new Map([[id, card]]), decoded: new Map([[id, metadata]]), card, metadata };
      if (text !== undefined) created.text = text;
      this.models.set(model, created);
      setPrimary(created, id);
    } else {
      entry.instances.set(id, card);
      entry.decoded.set(id, metadata);
      if (entry.card.instanceId === id) setPrimary(entry, id);
      else if (card.kvBlockSize !== entry.card.kvBlockSize) {
        this.logger.warn({ model, instanceId: id, blockSize: card.kvBlockSize, modelBlockSize: entry.card.kvBlockSize }, 'model registry: instances disagree on the KV block size; routing uses the oldest card');
      }
      if (entry.text === undefined && text !== undefined) entry.text = text;
    }
    this.emit({ type: 'instance-added', model, instanceId: id, card });
  }

  private deferRemoval(key: string, model: string, id: InstanceId, graceMs: number): void {
    if (this.pendingRemovals.has(key) || this.models.get(model)?.instances.has(id) !== true) return;
    const timer = setTimeout(() => {
      this.pendingRemovals.delete(key);
      this.cardTexts.delete(key);
      this.logger.info({ model, instanceId: id }, 'model registry: instance gone from discovery after a resync');
      this.remove(model, id);
    }, graceMs);
    timer.unref();
    this.pendingRemovals.set(key, timer);
  }

  /** Drop a held-back removal of `key`; true when there was one. */
  private cancelRemoval(key: string): boolean {
    const timer = this.pendingRemovals.get(key);
    if (timer === undefined) return false;
    clearTimeout(timer);
    this.pendingRemovals.delete(key);
    return true;
  }

  private remove(model: string, id: InstanceId): void {
    const entry = this.models.get(model);
    const card = entry?.instances.get(id);
    if (entry === undefined || card === undefined) return;
    entry.instances.delete(id);
    entry.decoded.delete(id);
    if (entry.instances.size === 0) this.models.delete(model);
    else if (entry.card === card) setPrimary(entry, entry.instances.keys().next().value as InstanceId);
    this.emit({ type: 'instance-removed', model, instanceId: id, card });
  }

  private emit(change: RegistryChange): void {
    for (const l of this.listeners) {
      try {
        l(change);
      } catch (e) {
        this.logger.error({ err: e, change: change.type }, 'model registry: a listener threw');
      }
    }
  }

  private textTools(card: ModelCard): Promise<LlmTextTools> {
    const source = card.tokenizer;
    if (source === undefined) return Promise.reject(invalidArgument(`LLM card of '${card.model}' has no tokenizer`));
    const hash = sourceHash(source);
    let cached = this.textCache.get(hash);
    if (cached === undefined) {
      this.tokenizerBuilds++;
      cached = buildTextTools(source);
      this.textCache.set(hash, cached);
      cached.catch(() => this.textCache.delete(hash));
    }
    return cached;
  }
}

/**
 * The role of an instance serving `entry` (its LLM card's `role`; absent, or a tensor model:
 * 'aggregated'). Prefill-role instances run only the prefill-only half of disaggregated generations:
 * no path that sends a whole request (generate, infer) may choose one (`takesWholeRequests`).
 */
export function instanceRole(entry: ModelEntry, id: InstanceId): WorkerRole {
  if (entry.kind !== 'llm') return 'aggregated';
  const metadata = entry.decoded.get(id) as LlmCardMetadata | undefined;
  return metadata === undefined ? 'aggregated' : roleOf(metadata);
}

/** Aggregated and decode instances take whole requests; prefill instances never do. */
export function takesWholeRequests(entry: ModelEntry, id: InstanceId): boolean {
  return instanceRole(entry, id) !== 'prefill';
}

/** Whether any instance of `entry` has a disaggregation role (prefill or decode): the model is served disaggregated. */
export function isDisaggregated(entry: ModelEntry): boolean {
  for (const id of entry.instances.keys()) if (instanceRole(entry, id) !== 'aggregated') return true;
  return false;
}

/** Instances of `entry` with `role`, in arrival order. */
export function instancesWithRole(entry: ModelEntry, role: WorkerRole): InstanceId[] {
  return [...entry.instances.keys()].filter((id) => instanceRole(entry, id) === role);
}

/** The refusal of a whole request to a model that has instances, all of them prefill workers. */
export function onlyPrefillWorkers(entry: ModelEntry): SwitchyardError {
  return unavailable(
    `model '${entry.name}' is served only by prefill workers (${entry.instances.size} registered), which run the prefill half of disaggregated requests only: start an aggregated or decode worker for it`,
  );
}

function setPrimary(entry: MutableEntry, id: InstanceId): void {
  entry.card = entry.instances.get(id)!;
  const metadata = entry.decoded.get(id)!;
  entry.metadata = metadata;
  if (entry.kind === 'llm') entry.llm = metadata as LlmCardMetadata;
}

/** sha256 over the source's canonical form (inline: file names sorted). */
export function sourceHash(source: TokenizerSource): string {
  const h = createHash('sha256');
  if (source.type === 'ref') h.update(`ref\0${source.uri}`);
  else for (const name of Object.keys(source.files).sort()) h.update(`${name}\0${source.files[name]}\0`);
  return h.digest('hex');
}

async function buildTextTools(source: TokenizerSource): Promise<LlmTextTools> {
  if (source.type === 'ref') {
    const dir = source.uri.startsWith('file://') ? fileURLToPath(source.uri) : source.uri;
    if (!isAbsolute(dir)) {
      throw unsupported(`tokenizer reference '${source.uri}': only absolute paths to a model folder are supported by the router`);
    }
    const files = await readModelFolder(dir);
    return {
      tokenizer: Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig, files.modelConfig),
      chatTemplate: ChatTemplate.fromTokenizerConfig(files.tokenizerConfig, files.chatTemplateFile),
    };
  }
  const files = source.files;
  const tokenizerText = files['tokenizer.json'];
  if (tokenizerText === undefined) throw invalidArgument('inline tokenizer has no tokenizer.json');
  const tokenizerJson = parseJsonObject(tokenizerText, 'tokenizer.json') as TokenizerJson;
  const configText = files['tokenizer_config.json'];
  const tokenizerConfig = (configText === undefined ? {} : parseJsonObject(configText, 'tokenizer_config.json')) as TokenizerConfigJson;
  const modelText = files['config.json'];
  const modelConfig = modelText === undefined ? undefined : (parseJsonObject(modelText, 'config.json') as ModelConfigJson);
  return {
    tokenizer: Tokenizer.fromJson(tokenizerJson, tokenizerConfig, modelConfig),
    chatTemplate: ChatTemplate.fromTokenizerConfig(tokenizerConfig, files['chat_template.jinja']),
  };
}

function parseJsonObject(text: string, file: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw invalidArgument(`inline ${file} is not JSON: ${(e as Error).message}`, e);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalidArgument(`inline ${file} is not a JSON object`);
  return v as Record<string, unknown>;
}
