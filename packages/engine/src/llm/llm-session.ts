/**
 * The `llm` backend's executor: the LLM engine's `OnnxExecutor` over a `DecoderSession` that runs on
 * a `SessionThread`, so a decoder's forward passes run on their own worker thread (onnxruntime-node's
 * `session.run` blocks the thread that calls it). The thread also samples the rows the executor asks
 * it to (`#sample_rows`: @switchyard/llm's sampling-rows.ts), so a step's [B, n, V] logits stay there;
 * scheduling, KV gather/scatter and guided decoding's sampling stay on the event loop between steps.
 *
 * `SessionThread.run` transfers the feeds' ArrayBuffers to the thread; a feed that is a view into a
 * larger buffer is copied first, so nothing the executor keeps is detached.
 */
import { OnnxExecutor, THREAD_SAMPLING_MIN_VOCAB, type DecoderSession, type DecoderTensor, type Executor, type ReasoningMarkers, type TokenVocabulary } from '@switchyard/llm';
import type { LlmModelOptions } from './llm-options.js';
import { LOGIT_ROWS_OUTPUT, SAMPLED_OUTPUT, SAMPLE_ROWS_INPUT } from '@switchyard/llm/internal';
import { SessionThread, type WireTensor } from '../onnxruntime/session-thread.js';

function owned(t: DecoderTensor): WireTensor {
  const d = t.data;
  const whole = d.byteOffset === 0 && d.byteLength === d.buffer.byteLength;
  return { type: t.type as WireTensor['type'], dims: [...t.dims], data: whole ? d : d.slice() };
}

/**
 * A decoder session on its own thread; on the CUDA execution provider of `gpu` when given. With
 * `sampleRows` false the thread does not load the sampler and `run` ignores a run's sample rows: the
 * logits come back and the executor samples them (DecoderSession's contract).
 */
export async function threadDecoderSession(modelFile: string, gpu?: number, sampleRows = true): Promise<DecoderSession> {
  // The decoder gets the machine's cores for its operators: LLM steps are few and large.
  const thread = await SessionThread.create(
    modelFile,
    {
      graphOptimizationLevel: 'all',
      ...(gpu !== undefined ? { executionProviders: [{ name: 'cuda', deviceId: gpu }] } : {}),
    },
    { sampleRows },
  );
  const outputNames = thread.outputMetadata.map((m) => m.name);
  // 'logits' stays among the fetches: the thread leaves them in the outputs when it cannot sample them.
  const sampledNames = [...outputNames, SAMPLED_OUTPUT, LOGIT_ROWS_OUTPUT];
  return {
    inputMetadata: thread.inputMetadata,
    outputMetadata: thread.outputMetadata,
    async run(feeds: Record<string, DecoderTensor>, rows?: Float64Array): Promise<Record<string, DecoderTensor>> {
      const wire: Record<string, WireTensor> = {};
      for (const [name, t] of Object.entries(feeds)) wire[name] = owned(t);
      const sampled = sampleRows && rows !== undefined;
      if (sampled) wire[SAMPLE_ROWS_INPUT] = owned({ type: 'float64', dims: [rows.length], data: rows });
      return (await thread.run(wire, sampled ? sampledNames : outputNames)) as unknown as Record<string, DecoderTensor>;
    },
    release: () => thread.release(),
  };
}

/** Load `modelFile` on a thread and build the executor for the version's KV settings. */
export async function createOnnxLlmExecutor(
  modelFile: string,
  options: LlmModelOptions,
  vocabSize: number,
  checkKvCacheBytes?: (bytes: number) => void,
  /**
   * The KV layout's model identity (a digest of the file; a promise lets it be computed while the
   * session loads); absent: no KV transfer.
   */
  modelId?: string | Promise<string>,
  /** The CUDA device the session runs on; absent: the CPU. */
  gpu?: number,
  /** The tokenizer's tokens as bytes, built at the first guided-decoding request; absent: none is served. */
  tokenVocabulary?: () => TokenVocabulary,
  /** The think markers of a model that names a reasoning parser: guided decoding starts after the reasoning. */
  reasoningMarkers?: ReasoningMarkers,
): Promise<{ executor: Executor; release: () => Promise<void> }> {
  // The thread loads the sampler only when the executor will ask it to sample (the same bound).
  const session = await threadDecoderSession(modelFile, gpu, vocabSize >= THREAD_SAMPLING_MIN_VOCAB);
  try {
    const id = await modelId;
    const executor = OnnxExecutor.create(session, {
      numBlocks: options.numBlocks,
      blockSize: options.blockSize,
      kvCacheDtype: options.kvCacheDtype,
      vocabSize,
      ...(checkKvCacheBytes !== undefined ? { checkKvCacheBytes } : {}),
      ...(options.seedGiven ? { seed: options.seed } : {}),
      ...(id !== undefined ? { modelId: id } : {}),
      ...(tokenVocabulary !== undefined ? { tokenVocabulary } : {}),
      ...(reasoningMarkers !== undefined ? { reasoningMarkers } : {}),
    });
    return { executor, release: () => session.release() };
  } catch (e) {
    await session.release();
    throw e;
  }
}
