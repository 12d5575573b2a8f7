/**
 * `LlmInstance`: a backend instance of an LLM model, answering KServe requests (HTTP `generate` /
 * `generate_stream`, gRPC `ModelInfer` / `ModelStreamInfer`) the way Triton's vLLM backend does:
 *
 * - inputs: `text_input` (BYTES, one element) required; optional `stream` (BOOL), `sampling_parameters`
 *   (BYTES: a JSON object of vLLM sampling fields) and `exclude_input_in_output` (BOOL);
 * - request parameters (the generate extension's `parameters`, gRPC `parameters`) may carry `stream`
 *   and any sampling field (`max_tokens`, `temperature`, `top_p`, `top_k`, `seed`, `stop`, ...); the
 *   `sampling_parameters` JSON wins over them;
 * - outputs: `text_output` (BYTES). Streaming: one response per text delta, the last one final.
 *   Not streaming: one final response with the whole text, preceded by the prompt unless
 *   `exclude_input_in_output` is true (vLLM backend behaviour). The final response's parameters carry
 *   `finish_reason`, `prompt_tokens`, `completion_tokens` and `cached_tokens`.
 *
 * Every request is answered through its `ResponseSender`; `execute` returns at once, so one instance
 * admits any number of concurrent generations and the LLM engine batches them (continuous batching).
 * A cancelled request (client gone) aborts its generation, which frees its KV blocks.
 */
import { randomUUID } from 'node:crypto';
import { describeValue, internal, invalidArgument, toSwitchyardError, type Logger } from '@switchyard/common';
import { deserializeBytesElements, modelParameters, serializeBytesElements, type InferTensor, type ParameterValue } from '@switchyard/kserve';
import {
  checkLogitBiasIds,
  compileSamplingParams,
  modelVocabSize,
  OutputProcessor,
  textPromptTokens,
  type LlmEndpoint,
  type SamplingDefaults,
  type SamplingParams,
} from '@switchyard/llm';
import type { BackendInstance, ExecutionOutcome, ResponseSender } from '../backend.js';
import type { NormalizedInput, NormalizedRequest } from '../request-normalizer.js';

const now = (): bigint => process.hrtime.bigint();
const utf8 = new TextDecoder('utf-8', { fatal: true });
const enc = new TextEncoder();

/** The request parameters that are not sampling fields. */
const NON_SAMPLING = new Set(['stream', 'exclude_input_in_output']);

export interface LlmInstanceOptions {
  readonly name: string;
  readonly endpoint: LlmEndpoint;
  /** `max_tokens` when a request sets none (vLLM's SamplingParams default is 16). */
  readonly defaultMaxTokens: number;
  readonly logger: Logger;
}

export class LlmInstance implements BackendInstance {
  readonly name: string;

  constructor(private readonly options: LlmInstanceOptions) {
    this.name = options.name;
  }

  async execute(requests: readonly NormalizedRequest[], senders?: readonly ResponseSender[]): Promise<ExecutionOutcome> {
    const computeStartNs = now();
    requests.forEach((request, i) => {
      const sender = senders?.[i];
      if (sender === undefined) return; // warmup: nothing listens
      this.generate(request, sender).catch((e: unknown) => {
        this.options.logger.error({ err: e }, 'LLM request failed unexpectedly');
        sender.send({ error: toSwitchyardError(e) }, true);
      });
    });
    const end = now();
    return {
      results: [],
      viaSender: requests.map(() => true),
      timing: { computeStartNs, computeInputEndNs: end, computeOutputStartNs: end, computeEndNs: end },
    };
  }

  async release(): Promise<void> {}

  private async generate(normalized: NormalizedRequest, sender: ResponseSender): Promise<void> {
    const { endpoint } = this.options;
    let parsed: ParsedLlmRequest;
    try {
      parsed = parseLlmRequest(normalized, this.options.defaultMaxTokens, endpoint.card.samplingDefaults);
      checkLogitBiasIds(parsed.sampling, modelVocabSize(endpoint));
    } catch (e) {
      sender.send({ error: toSwitchyardError(e) }, true);
      return;
    }
    const abort = new AbortController();
    sender.onCancel(() => abort.abort());
    if (sender.cancelled) return;
    let promptTokenIds: number[];
    try {
      promptTokenIds = await textPromptTokens(endpoint, parsed.prompt, true);
    } catch (e) {
      sender.send({ error: toSwitchyardError(e) }, true);
      return;
    }
    // the EOS ids the engine applies (the card's: none for the mocker), as the OpenAI door does
    const processor = new OutputProcessor({ tokenizer: endpoint.tokenizer, sampling: parsed.sampling, promptTokenIds, eosTokenIds: endpoint.card.eosTokenIds });
    const requestId = `${normalized.request.id === '' ? 'kserve' : normalized.request.id}-${randomUUID()}`;
    let text = '';
    try {
      for await (const output of endpoint.generate({ requestId, promptTokenIds, sampling: parsed.sampling }, abort.signal)) {
        const step = processor.process(output);
        if (step.stoppedByString) abort.abort();
        const finishReason = step.finishReason;
        if (parsed.stream) {
          if (finishReason === null) {
            if (step.text !== '') sender.send(textResponse(step.text), false);
            continue;
          }
          sender.send(textResponse(step.text, finalParameters(finishReason, promptTokenIds.length, output.usage, processor.numTokens)), true);
          return;
        }
        text += step.text;
        if (finishReason !== null) {
          const full = parsed.excludeInput ? text : parsed.prompt + text;
          sender.send(textResponse(full, finalParameters(finishReason, promptTokenIds.length, output.usage, processor.numTokens)), true);
          return;
        }
      }
      // The engine's stream always ends with a finish reason; ending without one is a bug.
      sender.send({ error: internal('LLM generation ended without a finish reason') }, true);
    } catch (e) {
      sender.send({ error: toSwitchyardError(e) }, true);
    }
  }
}

interface ParsedLlmRequest {
  readonly prompt: string;
  readonly stream: boolean;
  readonly excludeInput: boolean;
  readonly sampling: ReturnType<typeof compileSamplingParams>;
}

function textResponse(text: string, parameters: Record<string, ParameterValue> = {}): { outputs: InferTensor[]; parameters: Record<string, ParameterValue> } {
  return {
    outputs: [{ name: 'text_output', datatype: 'BYTES', shape: [1], data: serializeBytesElements([enc.encode(text)]), parameters: {} }],
    parameters,
  };
}

/**
 * The final response's parameters. `prompt_tokens` is the prompt this instance tokenized (as the
 * OpenAI path reports it): the engine's `usage` comes only with its own last output, which a stop
 * string pre-empts (the request is answered and aborted at once). `cached_tokens` is the engine's
 * figure, hence 0 when a stop string ended the generation before the engine's last output.
 */
function finalParameters(
  finishReason: string,
  promptTokens: number,
  usage: { promptTokens: number; completionTokens: number; cachedTokens: number } | undefined,
  completionTokens: number,
): Record<string, ParameterValue> {
  return {
    finish_reason: finishReason,
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    cached_tokens: usage?.cachedTokens ?? 0,
  };
}

function input(request: NormalizedRequest, name: string): NormalizedInput | undefined {
  return request.inputs.find((i) => i.name === name);
}

function bytesInput(request: NormalizedRequest, name: string): string | undefined {
  const t = input(request, name);
  if (t === undefined) return undefined;
  if (t.datatype !== 'BYTES') throw invalidArgument(`input '${name}' must be BYTES, got ${t.datatype}`);
  const elements = deserializeBytesElements(t.data, name);
  if (elements.length !== 1) throw invalidArgument(`input '${name}' must hold exactly one element, got ${elements.length}`);
  // Text the model reads: bytes that are not UTF-8 are refused (as Python's strict decode does in
  // Triton's vLLM backend), never replaced by U+FFFD.
  try {
    return utf8.decode(elements[0]);
  } catch {
    throw invalidArgument(`input '${name}' is not valid UTF-8`);
  }
}

function boolInput(request: NormalizedRequest, name: string): boolean | undefined {
  const t = input(request, name);
  if (t === undefined) return undefined;
  if (t.datatype !== 'BOOL' || t.data.length !== 1) throw invalidArgument(`input '${name}' must be one BOOL element`);
  return t.data[0] !== 0;
}

function boolParameter(value: ParameterValue | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw invalidArgument(`parameter '${name}' must be a boolean, got ${describeValue(String(value))}`);
  return value;
}

/**
 * The request's prompt, mode and validated sampling (invalid_argument naming the bad field), over the
 * model's `defaults` (its generation config) when given.
 */
export function parseLlmRequest(request: NormalizedRequest, defaultMaxTokens: number, defaults?: SamplingDefaults): ParsedLlmRequest {
  const prompt = bytesInput(request, 'text_input');
  if (prompt === undefined) throw invalidArgument("input 'text_input' is required");
  // The parameters vLLM's backend sees (`request.parameters()`): not the sequence id, flags, priority or timeout.
  const params = modelParameters(request.request.parameters);
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(params)) {
    if (NON_SAMPLING.has(k)) continue;
    fields[k] = typeof v === 'bigint' ? Number(v) : v;
  }
  const json = bytesInput(request, 'sampling_parameters');
  if (json !== undefined && json.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (e) {
      throw invalidArgument(`input 'sampling_parameters' is not valid JSON: ${(e as Error).message}`, e);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw invalidArgument("input 'sampling_parameters' must be a JSON object");
    }
    Object.assign(fields, parsed);
  }
  // Triton parameters cannot hold lists: a JSON list given as a string is accepted for these.
  for (const k of ['stop', 'stop_token_ids']) {
    const v = fields[k];
    if (typeof v === 'string' && v.trimStart().startsWith('[')) {
      try {
        fields[k] = JSON.parse(v);
      } catch {
        // a literal stop string that happens to start with '['
      }
    }
  }
  if (fields['max_tokens'] === undefined || fields['max_tokens'] === null) fields['max_tokens'] = defaultMaxTokens;
  const sampling = compileSamplingParams(fields as SamplingParams, defaults);
  const stream = boolInput(request, 'stream') ?? boolParameter(params['stream'], 'stream') ?? false;
  const excludeInput = boolInput(request, 'exclude_input_in_output') ?? boolParameter(params['exclude_input_in_output'], 'exclude_input_in_output') ?? false;
  return { prompt, stream, excludeInput, sampling };
}
