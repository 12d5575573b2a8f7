/**
 * `POST /v1/embeddings` on any InferenceEngine (a worker's, or a router's ClusterEngine): the models
 * it serves are the READY models of the `embedding` backend (their config says so, on a worker and in a
 * router's model cards alike). The inputs travel as few KServe infer requests as the model takes
 * (embeddings-batching.ts: up to `max_batch_size` rows each; one per input when the model does not
 * batch), all submitted at once, so the model's scheduler batches them further with concurrent requests
 * (`dynamic_batching`); on a router each request goes to a worker like any tensor request, one NATS
 * round trip. The answers' rows go back to the inputs' order. The first failure cancels the rest and is
 * the answer (one long input fails the request, as vLLM). A client that goes away cancels every pending
 * request.
 *
 * Response: OpenAI's `{object: "list", data: [{object: "embedding", index, embedding}], model,
 * usage: {prompt_tokens, total_tokens}}`; `encoding_format: "base64"` gives each embedding as the
 * base64 of its little-endian float32 bytes (as OpenAI; the SDK decodes it so).
 */
import type { ServerResponse } from 'node:http';
import { notFound } from '@switchyard/common';
import { EMBEDDING_BACKEND, EMBEDDING_DIMENSIONS_PARAMETER, EMBEDDING_TRUNCATE_PARAMETER, type InferenceEngine } from '@switchyard/engine';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import { InvalidParamError, type OpenAiModel } from '@switchyard/llm';
import { sendJson } from '../http/http-reply.js';
import { waitForModel } from '../wait-for-model.js';
import { type EmbeddingRow, embeddingRows, groupEmbeddingInputs } from './embeddings-batching.js';
import { parseEmbeddingsRequest } from './embeddings-request.js';

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
  const batchSize = engine.modelConfig(model).max_batch_size;
  const parameters: InferRequest['parameters'] = {};
  if (request.dimensions !== undefined) parameters[EMBEDDING_DIMENSIONS_PARAMETER] = request.dimensions;
  if (request.truncatePromptTokens !== undefined) parameters[EMBEDDING_TRUNCATE_PARAMETER] = request.truncatePromptTokens;
  const groups = groupEmbeddingInputs(request.inputs, batchSize);

  const abort = new AbortController();
  const onClose = (): void => {
    if (!res.writableEnded) abort.abort();
  };
  res.on('close', onClose);
  let answers: InferResponse[];
  try {
    answers = await Promise.all(
      groups.map((group) =>
        engine.infer({ id: '', modelName: model, modelVersion: undefined, parameters, inputs: [group.tensor], outputs: [] }, { signal: abort.signal }).catch((e: unknown) => {
          abort.abort(); // the request fails: the other groups need not run
          throw e;
        }),
      ),
    );
  } finally {
    res.off('close', onClose);
  }
  const rows: EmbeddingRow[] = new Array(request.inputs.length);
  groups.forEach((group, g) => embeddingRows(answers[g]!, group.indexes.length).forEach((row, j) => (rows[group.indexes[j]!] = row)));
  let promptTokens = 0;
  const data = rows.map(({ vector, tokens }, index) => {
    promptTokens += tokens;
    const embedding = request.encodingFormat === 'base64' ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector);
    return { object: 'embedding', index, embedding };
  });
  sendJson(res, 200, JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } }));
}
