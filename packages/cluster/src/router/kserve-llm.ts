/**
 * KServeLlm: the KServe face of the cluster's LLMs on a router (HTTP `generate` / `generate_stream`,
 * gRPC ModelInfer / ModelStreamInfer with a `text_input`). A request is normalized against the model's
 * config as the worker's engine would (`normalizeRequest`) and run by the engine's own `LlmInstance`
 * — the code a worker runs for it, so parameters, `sampling_parameters`, `stream`,
 * `exclude_input_in_output`, stop strings, text deltas and usage parameters are the worker's — over
 * the model's RoutedLlmEndpoint, which routes it KV-aware and migrates it with the tokens so far when
 * its worker dies. ClusterEngine decides which requests come here (`prepare`) and forwards the rest.
 *
 * One LlmInstance per routed endpoint, rebuilt when the model's config (its card) changes. Its
 * generations are counted by ClusterEngine as `infer`, not again as `generate`.
 */
import { type CancelSignal, type Logger, type SwitchyardError, cancelled, toSwitchyardError } from '@switchyard/common';
import type { InferResult, NormalizedRequest, ResponseSender } from '@switchyard/engine';
import { LlmInstance, compileLlmOptions, normalizeRequest, parseLlmRequest, requestPrefix } from '@switchyard/engine/internal';
import type { InferRequest } from '@switchyard/kserve';
import type { LlmEndpoint } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';
import type { RoutedLlmEndpoint } from './routed-llm-endpoint.js';
import type { RouterStatsRecorder } from './router-stats.js';

/** A request `prepare` accepted: what `serve` runs. */
export interface PreparedLlmRequest {
  readonly instance: LlmInstance;
  readonly normalized: NormalizedRequest;
  /** The model version the responses name (the request's, else the latest READY one). */
  readonly version: string;
}

export interface LlmModelView {
  readonly endpoint: RoutedLlmEndpoint;
  /** The LLM engine kind on the card (`llm` | `mocker`), for its config parameters. */
  readonly engine: 'llm' | 'mocker';
  readonly config: ModelConfig;
  readonly version: string;
}

export class KServeLlm {
  private readonly instances = new WeakMap<RoutedLlmEndpoint, { config: ModelConfig; instance: LlmInstance }>();

  constructor(private readonly deps: { readonly stats: RouterStatsRecorder; readonly logger: Logger }) {}

  /**
   * The request ready to run here, or undefined when it should be forwarded unchanged to a worker's
   * `infer` (so its answer, an error included, is the worker's own): the prompt is not one inline
   * `text_input` (shared memory inputs are not read here) or blank, or the request does not parse.
   */
  prepare(model: LlmModelView, request: InferRequest): PreparedLlmRequest | undefined {
    if (!request.inputs.some((i) => i.name === 'text_input')) return undefined;
    if (request.inputs.some((i) => i.parameters['shared_memory_region'] !== undefined)) return undefined;
    try {
      const instance = this.instanceFor(model);
      const normalized = normalizeRequest(model.config, request);
      // validation only: the instance parses it again with the model's default max_tokens
      if (parseLlmRequest(normalized, 1).prompt.trim() === '') return undefined;
      return { instance, normalized, version: model.version };
    } catch {
      return undefined;
    }
  }

  /**
   * Run a prepared request: the LlmInstance's responses are delivered as a worker's engine delivers
   * them (id, model name and version; the final flag). Resolves once the final result was delivered.
   * A caller's cancel ends it at once with the engine's cancelled error and stops the generation.
   */
  serve(prepared: PreparedLlmRequest, request: InferRequest, deliver: (r: InferResult) => void, signal: CancelSignal | undefined): Promise<void> {
    const model = request.modelName;
    return new Promise<void>((resolve) => {
      let open = true;
      let cancelListener: (() => void) | undefined;
      const close = (): void => {
        open = false;
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const fail = (error: SwitchyardError, final: boolean): void => {
        if (final) this.deps.stats.error(model, 'infer', error.code);
        deliver({ final, error });
      };
      const onAbort = (): void => {
        if (!open) return;
        close();
        const listener = cancelListener;
        cancelListener = undefined;
        try {
          listener?.();
        } catch {
          // the instance's cancel hook must not break delivery
        }
        fail(cancelled(`${requestPrefix(request.id)}Request was cancelled`), true);
      };
      const sender: ResponseSender = {
        send: (response, final) => {
          if (!open) return false;
          if (response === undefined && !final) return true;
          if (final) close();
          if (response === undefined) deliver({ final: true });
          else if ('error' in response) fail(response.error, final);
          else deliver({ final, response: { id: request.id, modelName: model, modelVersion: prepared.version, parameters: response.parameters ?? {}, outputs: response.outputs } });
          return true;
        },
        get cancelled() {
          return signal?.aborted === true;
        },
        onCancel: (listener) => {
          cancelListener = listener;
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      prepared.instance.execute([prepared.normalized], [sender]).catch((e: unknown) => sender.send({ error: toSwitchyardError(e) }, true));
    });
  }

  /** The model's LlmInstance over its routed endpoint (rebuilt when the config changes). */
  private instanceFor(model: LlmModelView): LlmInstance {
    const { endpoint, config } = model;
    const cached = this.instances.get(endpoint);
    if (cached?.config === config) return cached.instance;
    const defaultMaxTokens = compileLlmOptions(config, model.engine).defaultMaxTokens;
    // The endpoint as the instance sees it: its generations are counted by ClusterEngine (as `infer`).
    const view: LlmEndpoint = {
      get card() {
        return endpoint.card;
      },
      get tokenizer() {
        return endpoint.tokenizer;
      },
      get chatTemplate() {
        return endpoint.chatTemplate;
      },
      generate: (r, signal) => endpoint.generate(r, signal, false),
      metrics: () => endpoint.metrics(),
    };
    const instance = new LlmInstance({ name: `${config.name}_router`, endpoint: view, defaultMaxTokens, logger: this.deps.logger });
    this.instances.set(endpoint, { config, instance });
    return instance;
  }
}
