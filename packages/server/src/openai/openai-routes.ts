/**
 * The OpenAI front door on the worker's HTTP port, beside KServe (as vLLM's OpenAI server):
 * `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/embeddings` (openai-embeddings.ts),
 * `GET /v1/models`, `GET /v1/models/{id}` (LLMs and embedding models).
 *
 * Steps of a generation request: body (size-limited by `--http-max-input-size`, gzip/deflate
 * accepted, JSON content type) → decode and validate (`parseChatCompletionRequest` /
 * `parseCompletionRequest`) → wait while the engine holds the model's requests (a router's scale to
 * zero) → the model's `LlmEndpoint` (404 `model_not_found`) → prompt token ids
 * (`chatPrompt` / `completionPrompt`) → `runGeneration`. Every error of this door is rendered here
 * or in `runGeneration`, with OpenAI's body; none escapes to the KServe renderer.
 */
import { randomInt, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SwitchyardError, invalidArgument, notFound } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import {
  type AssemblerOptions,
  ChatAssembler,
  CompletionAssembler,
  InvalidParamError,
  type LlmEndpoint,
  type OpenAiModelList,
  type ParsedOpenAiRequest,
  type ToolCallIdStyle,
  chatParsingFor,
  chatPrompt,
  completionPrompt,
  resolveOutputParsing,
  decodeJsonBody,
  modelVocabSize,
  openAiModel,
  parseChatCompletionRequest,
  parseCompletionRequest,
  samplingFor,
} from '@switchyard/llm';
import { decompressBody, readBody, requestEncoding } from '../http/http-body.js';
import type { HttpContext } from '../http/http-context.js';
import { sendJson } from '../http/http-reply.js';
import type { OpenAiAction } from '../http/http-router.js';
import { waitForModel } from '../wait-for-model.js';
import { sendOpenAiError } from './openai-errors.js';
import { choiceRequests, runGeneration, type GenerationChoice } from './openai-generation.js';
import { embeddingModelEntry, embeddingModels, handleEmbeddings } from './openai-embeddings.js';

/** Serve one `/v1` route; never throws (errors are answered here). */
export async function handleOpenAi(ctx: HttpContext, req: IncomingMessage, res: ServerResponse, action: OpenAiAction, model?: string): Promise<void> {
  try {
    switch (action) {
      case 'models':
        return await listModels(ctx.engine, res);
      case 'model':
        return await retrieveModel(ctx.engine, res, model ?? '');
      case 'chat_completions':
        return await chatCompletions(ctx, req, res);
      case 'completions':
        return await completions(ctx, req, res);
      case 'embeddings':
        return await handleEmbeddings(ctx.engine, res, await readJson(ctx, req));
    }
  } catch (e) {
    // Expected failures are SwitchyardErrors; anything else is a bug worth a warning.
    if (!(e instanceof SwitchyardError)) ctx.logger.warn({ err: e, action }, 'OpenAI request failed unexpectedly');
    if (!res.headersSent) sendOpenAiError(res, e);
    else if (!res.writableEnded) res.end();
  }
}

async function listModels(engine: InferenceEngine, res: ServerResponse): Promise<void> {
  const llms = (engine.llmEndpoints?.() ?? []).map((e) => openAiModel(e.card));
  const embeddings = (await embeddingModels(engine)).map(embeddingModelEntry);
  const list: OpenAiModelList = { object: 'list', data: [...llms, ...embeddings].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) };
  sendJson(res, 200, JSON.stringify(list));
}

async function retrieveModel(engine: InferenceEngine, res: ServerResponse, model: string): Promise<void> {
  if (engine.llmEndpoint?.(model) === undefined && (await embeddingModels(engine)).includes(model)) {
    return sendJson(res, 200, JSON.stringify(embeddingModelEntry(model)));
  }
  sendJson(res, 200, JSON.stringify(openAiModel(endpointFor(engine, model).card)));
}

async function chatCompletions(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const request = parseChatCompletionRequest(await readJson(ctx, req));
  if (request.model !== undefined) await waitForModel(ctx.engine, request.model, res, 'close');
  const endpoint = endpointFor(ctx.engine, request.model);
  // The model's parsers over this door's flags; a tool_choice they cannot honour is refused before rendering.
  const plan = chatParsingFor(resolveOutputParsing(endpoint.card.outputParsing, ctx.outputParsing), request, toolCallId, endpoint.card.outputParsing);
  const prompt = await chatPrompt(endpoint, request.messages, {
    templateKwargs: request.chatTemplateKwargs,
    addSpecialTokens: request.addSpecialTokens,
    tools: request.tools,
  });
  const id = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  // each choice parses its own output (parsers keep state)
  const parsingFor = () => plan.parsing?.({ promptText: prompt.promptText, templateKwargs: request.chatTemplateKwargs });
  const choices = choicesOf(id, endpoint, request, [prompt.promptTokenIds], (index) => new ChatAssembler(assemblerOptions(id, endpoint, request, request.logprobs, index), parsingFor()));
  await runGeneration(res, { ...generation(id, endpoint, request), choices, skipSpecialTokens: plan.skipSpecialTokens }, ctx.logger);
}

async function completions(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const request = parseCompletionRequest(await readJson(ctx, req));
  if (request.model !== undefined) await waitForModel(ctx.engine, request.model, res, 'close');
  const endpoint = endpointFor(ctx.engine, request.model);
  const prompts = await Promise.all(request.prompts.map((p) => completionPrompt(endpoint, p, request.addSpecialTokens)));
  const id = `cmpl-${randomUUID().replaceAll('-', '')}`;
  const choices = choicesOf(
    id,
    endpoint,
    request,
    prompts.map((p) => p.promptTokenIds),
    (index, prompt) => new CompletionAssembler(assemblerOptions(id, endpoint, request, request.logprobs !== null, index), request.echo ? (prompts[prompt]?.promptText ?? '') : ''),
  );
  await runGeneration(res, { ...generation(id, endpoint, request), choices }, ctx.logger);
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** vLLM's tool call ids: `chatcmpl-tool-` and 32 hex digits; for Mistral's parser 9 letters and digits, as vLLM makes them. */
function toolCallId(style: ToolCallIdStyle): string {
  if (style === 'mistral') return Array.from({ length: 9 }, () => ALPHANUMERIC[randomInt(ALPHANUMERIC.length)]).join('');
  return `chatcmpl-tool-${randomUUID().replaceAll('-', '')}`;
}

/** The generation's common part. */
function generation(id: string, endpoint: LlmEndpoint, request: ParsedOpenAiRequest) {
  return { endpoint, requestId: id, stream: request.stream, includeUsage: request.includeUsage };
}

/**
 * `request.n` choices per prompt, prompt-major (choice `p * n + i`, as vLLM); their sampling is the
 * request's over the model's generation config, with each choice's seed (`choiceRequests`).
 */
function choicesOf(
  id: string,
  endpoint: LlmEndpoint,
  request: ParsedOpenAiRequest,
  prompts: ReadonlyArray<readonly number[]>,
  assembler: (index: number, prompt: number) => ChatAssembler | CompletionAssembler,
): GenerationChoice[] {
  const sampling = samplingFor(request, endpoint.card.samplingDefaults, modelVocabSize(endpoint));
  return prompts.flatMap((promptTokenIds, prompt) =>
    choiceRequests(id, request.n, prompt, prompts.length, sampling).map((c, i) => ({
      ...c,
      prompt,
      promptTokenIds,
      assembler: assembler(prompt * request.n + i, prompt),
    })),
  );
}

function assemblerOptions(id: string, endpoint: LlmEndpoint, request: ParsedOpenAiRequest, logprobs: boolean, index: number): AssemblerOptions {
  return {
    head: { id, created: Math.floor(Date.now() / 1000), model: request.model ?? endpoint.card.name },
    includeUsage: request.includeUsage,
    logprobs,
    index,
    tokenText: (tokenId) => endpoint.tokenizer.decode([tokenId]),
  };
}

/**
 * The ready LLM named `model`; without a name, the worker's only LLM (vLLM serves one model and lets
 * clients omit it).
 */
function endpointFor(engine: InferenceEngine, model: string | undefined): LlmEndpoint {
  if (model === undefined) {
    const all = engine.llmEndpoints?.() ?? [];
    if (all.length === 1) return all[0] as LlmEndpoint;
    throw new InvalidParamError('model', 'model is required: this worker serves more than one model, or none');
  }
  const endpoint = engine.llmEndpoint?.(model);
  if (endpoint === undefined) throw modelNotFound(model);
  return endpoint;
}

/** OpenAI's wording. */
function modelNotFound(model: string): SwitchyardError {
  return notFound(`The model \`${model}\` does not exist.`);
}

/**
 * The request body as JSON. A declared content type must be JSON (`application/json` or `+json`);
 * none is accepted, as in FastAPI.
 */
async function readJson(ctx: HttpContext, req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req, ctx.maxInputSize);
  const type = req.headers['content-type'];
  if (type !== undefined && !isJsonType(type)) {
    throw invalidArgument(`Content-Type must be application/json, got '${type}'`);
  }
  const body = await decompressBody(raw, requestEncoding(req), ctx.maxInputSize);
  return decodeJsonBody(body);
}

function isJsonType(contentType: string): boolean {
  const mediaType = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}
