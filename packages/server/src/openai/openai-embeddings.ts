/**
 * `POST /v1/embeddings` on any InferenceEngine (a worker's, or a router's ClusterEngine): the models
 * it serves are the READY models of the `embedding` backend (their config says so, on a worker and in a
 * router's model cards alike). Each input becomes one KServe infer request to the model (`text_input`
 * or `input_ids`, embedding-io.ts), all submitted at once, so the model's scheduler batches them with
 * each other and with concurrent requests (`dynamic_batching`); on a router each goes to a worker like
 * any tensor request. The first failure cancels the rest and is the answer (one long input fails the
 * request, as vLLM). A client that goes away cancels every pending input.
 *
 * Response: OpenAI's `{object: "list", data: [{object: "embedding", index, embedding}], model,
 * usage: {prompt_tokens, total_tokens}}`; `encoding_format: "base64"` gives each embedding as the
 * base64 of its little-endian float32 bytes (as OpenAI; the SDK decodes it so).
 */
import type { ServerResponse } from 'node:http';
import { internal, notFound } from '@switchyard/common';
import {
  EMBEDDING_BACKEND,
  EMBEDDING_DIMENSIONS_PARAMETER,
  EMBEDDING_IDS_INPUT,
  EMBEDDING_OUTPUT,
  EMBEDDING_TEXT_INPUT,
  EMBEDDING_TOKENS_OUTPUT,
  EMBEDDING_TRUNCATE_PARAMETER,
  type InferenceEngine,
} from '@switchyard/engine';
import { type InferRequest, type InferResponse, type InferTensor, serializeStringElements } from '@switchyard/kserve';
import { InvalidParamError, type OpenAiModel } from '@switchyard/llm';
import { sendJson } from '../http/http-reply.js';
import { waitForModel } from '../wait-for-model.js';
import { type EmbeddingInput, parseEmbeddingsRequest } from './embeddings-request.js';

/** The READY embedding models' names, sorted. */
export async function embeddingModels(engine: InferenceEngine): Promise<string[]> {
  const names = new Set((await engine.repositoryIndex(true)).filter((e) => e.state === 'READY').map((e) => e.name));
  return [...names].filter((n) => isEmbeddingModel(engine, n)).sort();
}

function isEmbeddingModel(engine: InferenceEngine, name: string): boolean {
  try {
    return engine.modelConfig(name).backend === EMBEDDING_BACKEND;
  } catch {
    return false; // not ready (any more)
  }
}

/** The `/v1/models` entry of an embedding model. */
export function embeddingModelEntry(name: string): OpenAiModel {
  return { id: name, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'switchyard' };
}

/** The model a request names (404 when unknown, 400 when not an embedding model), or the only one. */
async function modelFor(engine: InferenceEngine, model: string | undefined): Promise<string> {
  if (model === undefined) {
    const all = await embeddingModels(engine);
    if (all.length === 1) return all[0]!;
    throw new InvalidParamError('model', 'model is required: this server serves more than one embedding model, or none');
  }
  let backend: string;
  try {
    backend = engine.modelConfig(model).backend;
  } catch {
    throw notFound(`The model \`${model}\` does not exist.`);
  }
  if (backend !== EMBEDDING_BACKEND) throw new InvalidParamError('model', `The model \`${model}\` does not support the Embeddings API`);
  return model;
}

/** Answer one embeddings request whose body (`body`, decoded JSON) the door has read; throws what it refuses. */
export async function handleEmbeddings(engine: InferenceEngine, res: ServerResponse, body: unknown): Promise<void> {
  const request = parseEmbeddingsRequest(body);
  if (request.model !== undefined) await waitForModel(engine, request.model, res, 'close');
  const model = await modelFor(engine, request.model);
  const batched = engine.modelConfig(model).max_batch_size > 0;
  const parameters: InferRequest['parameters'] = {};
  if (request.dimensions !== undefined) parameters[EMBEDDING_DIMENSIONS_PARAMETER] = request.dimensions;
  if (request.truncatePromptTokens !== undefined) parameters[EMBEDDING_TRUNCATE_PARAMETER] = request.truncatePromptTokens;

  const abort = new AbortController();
  const onClose = (): void => {
    if (!res.writableEnded) abort.abort();
  };
  res.on('close', onClose);
  let answers: InferResponse[];
  try {
    answers = await Promise.all(
      request.inputs.map((input) =>
        engine.infer({ id: '', modelName: model, modelVersion: undefined, parameters, inputs: [tensorOf(input, batched)], outputs: [] }, { signal: abort.signal }).catch((e: unknown) => {
          abort.abort(); // the request fails: the other inputs need not run
          throw e;
        }),
      ),
    );
  } finally {
    res.off('close', onClose);
  }
  let promptTokens = 0;
  const data = answers.map((answer, index) => {
    const { vector, tokens } = embeddingOf(answer);
    promptTokens += tokens;
    const embedding = request.encodingFormat === 'base64' ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector);
    return { object: 'embedding', index, embedding };
  });
  sendJson(res, 200, JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } }));
}

function tensorOf(input: EmbeddingInput, batched: boolean): InferTensor {
  if ('text' in input) {
    return { name: EMBEDDING_TEXT_INPUT, datatype: 'BYTES', shape: batched ? [1, 1] : [1], data: serializeStringElements([input.text]), parameters: {} };
  }
  const ids = BigInt64Array.from(input.ids, (id) => BigInt(id));
  return { name: EMBEDDING_IDS_INPUT, datatype: 'INT64', shape: batched ? [1, ids.length] : [ids.length], data: new Uint8Array(ids.buffer), parameters: {} };
}

/** One answer's vector (a copy, aligned) and token count; a malformed answer is a server error. */
function embeddingOf(answer: InferResponse): { vector: Float32Array; tokens: number } {
  const out = answer.outputs.find((o) => o.name === EMBEDDING_OUTPUT);
  const count = answer.outputs.find((o) => o.name === EMBEDDING_TOKENS_OUTPUT);
  if (out === undefined || out.datatype !== 'FP32' || out.data.byteLength % 4 !== 0 || count === undefined || count.datatype !== 'INT32' || count.data.byteLength !== 4) {
    throw internal(`model '${answer.modelName}' answered without the '${EMBEDDING_OUTPUT}' FP32 and '${EMBEDDING_TOKENS_OUTPUT}' INT32 outputs of one sequence`);
  }
  const vector = new Float32Array(out.data.slice().buffer);
  const tokens = new DataView(count.data.buffer, count.data.byteOffset, 4).getInt32(0, true);
  return { vector, tokens };
}
