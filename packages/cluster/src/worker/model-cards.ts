/**
 * Model cards: what a worker tells routers about each READY model (runtime ModelCard + this package's
 * card metadata), and the registry that keeps Discovery in line with the engine.
 *
 * Card per model:
 * - LLM (the engine has an LlmEndpoint for it: `llm` / `mocker` backends): `kind: 'llm'` on the
 *   `generate` endpoint, with the tokenizer, block size, context length and LlmCardMetadata (with the
 *   worker's role, and the KV transfer address + layout when the worker has a transfer plane).
 * - anything else: `kind: 'tensor'` on the `infer` endpoint, with TensorCardMetadata.
 *
 * Tokenizer: the model folder's tokenizer.json, tokenizer_config.json, chat_template.jinja and
 * config.json travel inline while they total at most MAX_INLINE_TOKENIZER_BYTES; a bigger tokenizer
 * (etcd refuses requests over 1.5 MiB) is published as `{type: 'ref', uri: <absolute folder>}`, which
 * only routers that can read the same path (shared volume, same host) can use.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { LlmEndpoint } from '@switchyard/llm';
import { renderModelConfigJson } from '@switchyard/model-config';
import {
  componentName,
  endpointName,
  modelName,
  type Discovery,
  type InstanceId,
  type JsonValue,
  type ModelCard,
  type Namespace,
  type TokenizerSource,
} from '@switchyard/runtime';
import { GENERATE_ENDPOINT, INFER_ENDPOINT, WORKER_COMPONENT, type LlmCardMetadata, type TensorCardMetadata, type WorkerRole } from '../protocols.js';

/** Largest total size of inline tokenizer files (etcd's default request limit is 1.5 MiB). */
export const MAX_INLINE_TOKENIZER_BYTES = 1024 * 1024;
/** The model-folder files a router needs to tokenise and apply the chat template. */
export const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'config.json'] as const;

/** Inline files, or a ref to the folder when they are too big. Throws when tokenizer.json cannot be read. */
export async function readTokenizerSource(folder: string, logger: Logger, model: string): Promise<TokenizerSource> {
  const files: { [name: string]: string } = {};
  let bytes = 0;
  for (const name of TOKENIZER_FILES) {
    let text: string;
    try {
      text = await readFile(resolve(folder, name), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && name !== 'tokenizer.json') continue;
      throw e;
    }
    files[name] = text;
    bytes += Buffer.byteLength(text, 'utf8');
  }
  if (bytes > MAX_INLINE_TOKENIZER_BYTES) {
    const uri = resolve(folder);
    logger.info({ model, bytes, uri }, 'tokenizer files too big to publish inline: the model card refers to the model folder');
    return { type: 'ref', uri };
  }
  return { type: 'inline', files };
}

/**
 * Largest JSON size of a card's classification labels. A card must stay under etcd's 1.5 MiB request
 * limit next to an inline tokenizer of up to MAX_INLINE_TOKENIZER_BYTES; label files are usually small
 * (ImageNet's 1000 classes are ~20 KiB), bigger ones are left off the card (logged at warn).
 */
export const MAX_CARD_LABEL_BYTES = 256 * 1024;

/** KServe metadata and `/config` JSON of a model, exactly as the worker's HTTP door renders them, and its READY versions' labels. */
export function tensorCardMetadata(engine: InferenceEngine, model: string, logger?: Logger): TensorCardMetadata {
  const m = engine.modelMetadata(model);
  const config = engine.modelConfig(model);
  const tensor = (t: (typeof m.inputs)[number]) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape] });
  const labels = cardLabels(engine, model, m.versions, logger);
  return {
    modelMetadata: { name: m.name, versions: [...m.versions], platform: m.platform, inputs: m.inputs.map(tensor), outputs: m.outputs.map(tensor) },
    modelConfig: JSON.parse(renderModelConfigJson(config)) as { [k: string]: unknown },
    versions: [...m.versions],
    decoupled: config.model_transaction_policy?.decoupled === true,
    ...(labels !== undefined ? { labels } : {}),
    binaryTensors: true,
  };
}

/** Each version's output labels; undefined when none has any or they exceed MAX_CARD_LABEL_BYTES. */
function cardLabels(engine: InferenceEngine, model: string, versions: readonly string[], logger: Logger | undefined): TensorCardMetadata['labels'] {
  const out: { [version: string]: { [output: string]: readonly string[] } } = {};
  for (const version of versions) {
    const labels = engine.classificationLabels?.(model, Number(version));
    if (labels === undefined || labels.size === 0) continue;
    out[version] = Object.fromEntries(labels);
  }
  if (Object.keys(out).length === 0) return undefined;
  const bytes = Buffer.byteLength(JSON.stringify(out), 'utf8');
  if (bytes > MAX_CARD_LABEL_BYTES) {
    logger?.warn({ model, bytes, limit: MAX_CARD_LABEL_BYTES }, 'classification labels too big for the model card: routers answer classification without labels');
    return undefined;
  }
  return out;
}

export interface CardTarget {
  readonly namespace: Namespace;
  readonly instanceId: InstanceId;
  /** false: the worker publishes no KV events (routers use approximate mode). Default true. */
  readonly kvEvents?: boolean;
  /** The worker's role, on every LLM card. Default 'aggregated'. */
  readonly role?: WorkerRole;
  /**
   * The KV transfer server's advertised `host:port`, asked for each LLM whose engine can transfer KV
   * (the worker starts its one server on the first call); undefined or absent: no transfer plane, and
   * the card has no `kvTransfer`.
   */
  readonly kvTransferAddress?: () => Promise<string | undefined>;
}

/** The card of one READY model. Throws when the engine no longer has it or an LLM's tokenizer is unreadable. */
export async function buildModelCard(engine: InferenceEngine, model: string, target: CardTarget, logger: Logger): Promise<ModelCard> {
  const tensor = tensorCardMetadata(engine, model, logger);
  const llm: LlmEndpoint | undefined = engine.llmEndpoint?.(model);
  const base = {
    v: 1 as const,
    model: modelName(model),
    namespace: target.namespace,
    component: componentName(WORKER_COMPONENT),
    instanceId: target.instanceId,
  };
  if (llm === undefined) {
    return { ...base, kind: 'tensor', endpoint: endpointName(INFER_ENDPOINT), metadata: tensor as unknown as { [k: string]: JsonValue } };
  }
  if (llm.modelFolder === undefined) throw new Error(`LLM '${model}' does not say where its tokenizer files are`);
  const metadata: LlmCardMetadata = {
    ...tensor,
    engine: llm.card.kind,
    totalKvBlocks: llm.card.totalKvBlocks,
    eosTokenIds: [...llm.card.eosTokenIds],
    ...(llm.card.vocabSize !== undefined ? { vocabSize: llm.card.vocabSize } : {}),
    ...(llm.card.samplingDefaults !== undefined ? { samplingDefaults: llm.card.samplingDefaults } : {}),
    created: llm.card.created,
    kvEvents: target.kvEvents !== false && llm.kv !== undefined,
    role: target.role ?? 'aggregated',
    ...(llm.card.outputParsing === undefined ? {} : { outputParsing: { ...llm.card.outputParsing } }),
  };
  const address = llm.kvTransfer !== undefined ? await target.kvTransferAddress?.() : undefined;
  const withTransfer: LlmCardMetadata = address !== undefined ? { ...metadata, kvTransfer: { address, layout: { ...llm.kvTransfer!.layout } } } : metadata;
  return {
    ...base,
    kind: 'llm',
    endpoint: endpointName(GENERATE_ENDPOINT),
    tokenizer: await readTokenizerSource(llm.modelFolder, logger, model),
    kvBlockSize: llm.card.blockSize,
    contextLength: llm.card.contextLength,
    metadata: withTransfer as unknown as { [k: string]: JsonValue },
  };
}

/**
 * Keeps Discovery's model cards equal to the engine's READY models. `sync()` may be called any time
 * (start, every model change); runs never overlap, and a call during a run schedules one more run.
 * A changed card is unregistered and registered again (registration is create-if-absent).
 */
export class ModelCardRegistry {
  private readonly registered = new Map<string, string>();
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(
    private readonly engine: InferenceEngine,
    private readonly discovery: Discovery,
    private readonly target: CardTarget,
    private readonly logger: Logger,
  ) {}

  /** Names with a registered card. */
  models(): string[] {
    return [...this.registered.keys()].sort();
  }

  /** Resolves after a run that started after this call. */
  sync(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running !== undefined) {
      this.again = true;
      return this.running;
    }
    const run = async (): Promise<void> => {
      do {
        this.again = false;
        await this.reconcile();
      } while (this.again && !this.closed);
    };
    this.running = run().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Stop syncing and remove every card (drain). */
  async unregisterAll(): Promise<void> {
    this.closed = true;
    await this.running;
    await Promise.all(
      [...this.registered.keys()].map(async (name) => {
        await this.discovery.unregisterModel(modelName(name)).catch((e: unknown) => this.logger.warn({ err: e, model: name }, 'failed to unregister model card'));
        this.registered.delete(name);
      }),
    );
  }

  private async reconcile(): Promise<void> {
    const ready = new Set((await this.engine.repositoryIndex(true)).filter((r) => r.state === undefined || r.state === 'READY').map((r) => r.name));
    if (this.closed) return;
    for (const name of [...this.registered.keys()]) {
      if (ready.has(name)) continue;
      await this.discovery.unregisterModel(modelName(name)).catch((e: unknown) => this.logger.warn({ err: e, model: name }, 'failed to unregister model card'));
      this.registered.delete(name);
      this.logger.info({ model: name }, 'model card unregistered');
    }
    for (const name of [...ready].sort()) {
      if (this.closed) return;
      let card: ModelCard;
      try {
        card = await buildModelCard(this.engine, name, this.target, this.logger);
      } catch (e) {
        // unloaded meanwhile (the next change notification syncs again), or an unreadable tokenizer
        if (this.engine.isModelReady(name)) this.logger.error({ err: e, model: name }, 'cannot build the model card; the model is not announced');
        continue;
      }
      const json = JSON.stringify(card);
      const previous = this.registered.get(name);
      if (previous === json) continue;
      try {
        if (previous !== undefined) await this.discovery.unregisterModel(card.model);
        this.registered.delete(name);
        await this.discovery.registerModel(card);
        this.registered.set(name, json);
        this.logger.info({ model: name, kind: card.kind }, previous === undefined ? 'model card registered' : 'model card updated');
      } catch (e) {
        this.logger.error({ err: e, model: name }, 'failed to register model card');
      }
    }
  }
}
