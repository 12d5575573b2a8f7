/**
 * A tiny BERT-like sentence encoder with deterministic weights, in the signature sentence-transformers
 * models are exported to ONNX with (Optimum's `feature-extraction` task):
 *
 *   input_ids      INT64 [batch_size, sequence_length]
 *   attention_mask INT64 [batch_size, sequence_length]
 *   token_type_ids INT64 [batch_size, sequence_length]
 *   → last_hidden_state FLOAT [batch_size, sequence_length, hidden]
 *
 * Graph: token + token-type + position embeddings → one mixing layer: each token adds the masked mean
 * of the sequence (a one-head "attention" with uniform weights over the attended tokens), then
 * `tanh(x W + b)` with a residual. Padding positions (mask 0) never change another token's state, so
 * a padded batch gives every sequence the hidden states it has alone: what the serving side's padding
 * must preserve, and what a test can check against single-sequence runs.
 *
 * The vocabulary is the tiny tokenizer's (tiny-tokenizer-files.ts), so its tokenizer.json drives it.
 */
import { GraphBuilder } from './graph-builder.js';
import { mulberry32, uniformFloats } from './prng.js';
import { TINY_DECODER_SHAPE, buildTinyTokenizerFiles } from './tiny-tokenizer-files.js';

export interface TinyEncoderShape {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly maxPositionEmbeddings: number;
  readonly typeVocabSize: number;
}

export const TINY_ENCODER_SHAPE: TinyEncoderShape = {
  vocabSize: TINY_DECODER_SHAPE.vocabSize,
  hiddenSize: 32,
  maxPositionEmbeddings: 128,
  typeVocabSize: 2,
};

export interface TinyEncoderOptions {
  readonly shape?: TinyEncoderShape;
  readonly seed?: number;
  /** Include the `token_type_ids` input (BERT exports do; MPNet / XLM-R ones do not). Default true. */
  readonly tokenTypeIds?: boolean;
  /**
   * Export the whole sentence-transformers pipeline, as Optimum does for a `SentenceTransformer`:
   * outputs `token_embeddings` [batch, seq, hidden] and `sentence_embedding` [batch, hidden] (the
   * masked mean of the tokens, not normalised) instead of `last_hidden_state`. Default false.
   */
  readonly pooled?: boolean;
}

const BATCH = 'batch_size';
const SEQ = 'sequence_length';

export function buildTinyEncoderModel(options: TinyEncoderOptions = {}): Uint8Array {
  const { vocabSize: V, hiddenSize: H, maxPositionEmbeddings: P, typeVocabSize: T } = options.shape ?? TINY_ENCODER_SHAPE;
  const withTypes = options.tokenTypeIds ?? true;
  const next = mulberry32(options.seed ?? 4321);
  const g = new GraphBuilder('tiny_encoder');
  g.input('input_ids', 'INT64', [BATCH, SEQ]);
  g.input('attention_mask', 'INT64', [BATCH, SEQ]);
  if (withTypes) g.input('token_type_ids', 'INT64', [BATCH, SEQ]);
  const pooled = options.pooled ?? false;
  const tokens = pooled ? 'token_embeddings' : 'last_hidden_state';
  g.output(tokens, 'FLOAT', [BATCH, SEQ, H]);
  if (pooled) g.output('sentence_embedding', 'FLOAT', [BATCH, H]);

  const weight = (name: string, dims: number[], limit: number): void => {
    g.initializer(name, 'FLOAT', dims, uniformFloats(next, dims.reduce((a, b) => a * b, 1), limit));
  };
  weight('word_embeddings', [V, H], 1);
  if (withTypes) weight('token_type_embeddings', [T, H], 0.2);
  weight('position_embeddings', [P, H], 0.2);
  weight('dense.weight', [H, H], Math.sqrt(3 / H));
  weight('dense.bias', [H], 0.1);
  g.initializer('i0', 'INT64', [], [0]);
  g.initializer('i1', 'INT64', [], [1]);
  g.initializer('axes_last', 'INT64', [1], [-1]);
  g.initializer('axes_seq', 'INT64', [1], [1]);
  g.initializer('tiny', 'FLOAT', [], [1e-9]);

  // Embeddings: word + type + position (positions 0..seq-1).
  g.node('Gather', ['word_embeddings', 'input_ids'], ['words'], { axis: 0 });
  g.node('Shape', ['input_ids'], ['ids_shape']);
  g.node('Gather', ['ids_shape', 'i1'], ['seq_len'], { axis: 0 });
  g.node('Range', ['i0', 'seq_len', 'i1'], ['positions']);
  g.node('Gather', ['position_embeddings', 'positions'], ['pos'], { axis: 0 });
  g.node('Add', ['words', 'pos'], ['emb_wp']);
  let emb = 'emb_wp';
  if (withTypes) {
    g.node('Gather', ['token_type_embeddings', 'token_type_ids'], ['types'], { axis: 0 });
    g.node('Add', ['emb_wp', 'types'], ['emb']);
    emb = 'emb';
  }
  // Context: masked mean over the sequence, [batch, 1, H].
  g.node('Cast', ['attention_mask'], ['mask_f'], { to: 1 });
  g.node('Unsqueeze', ['mask_f', 'axes_last'], ['mask3']);
  g.node('Mul', [emb, 'mask3'], ['masked']);
  g.node('ReduceSum', ['masked', 'axes_seq'], ['ctx_sum'], { keepdims: 1 });
  g.node('ReduceSum', ['mask3', 'axes_seq'], ['ctx_count'], { keepdims: 1 });
  g.node('Add', ['ctx_count', 'tiny'], ['ctx_den']);
  g.node('Div', ['ctx_sum', 'ctx_den'], ['ctx']);
  g.node('Add', [emb, 'ctx'], ['mixed']);
  g.node('MatMul', ['mixed', 'dense.weight'], ['proj']);
  g.node('Add', ['proj', 'dense.bias'], ['proj_b']);
  g.node('Tanh', ['proj_b'], ['act']);
  g.node('Add', [emb, 'act'], [tokens]);
  if (pooled) {
    g.node('Mul', [tokens, 'mask3'], ['out_masked']);
    g.node('ReduceSum', ['out_masked', 'axes_seq'], ['out_sum'], { keepdims: 0 });
    g.node('ReduceSum', ['mask3', 'axes_seq'], ['out_count'], { keepdims: 0 });
    g.node('Add', ['out_count', 'tiny'], ['out_den']);
    g.node('Div', ['out_sum', 'out_den'], ['sentence_embedding']);
  }
  return g.buildModel();
}

/** Pooling modes of sentence-transformers' `1_Pooling/config.json`. */
export type TinyPoolingMode = 'mean' | 'cls' | 'max' | 'lasttoken';

export interface SentenceTransformersFolderOptions {
  readonly pooling: TinyPoolingMode;
  readonly normalize: boolean;
  readonly maxSeqLength: number;
}

/**
 * The files of a sentence-transformers model folder around the tiny encoder: `tokenizer.json`,
 * `tokenizer_config.json`, `config.json` (BERT-like; no Matryoshka dimensions), `modules.json`
 * (Transformer → Pooling → Normalize when `normalize`), `1_Pooling/config.json`,
 * `sentence_bert_config.json`. Paths are relative to the version folder.
 */
export function sentenceTransformersFiles(options: SentenceTransformersFolderOptions): Record<string, string> {
  const tok = buildTinyTokenizerFiles();
  const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
  const modules = [
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
  ];
  if (options.normalize) modules.push({ idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' });
  const { hiddenSize, vocabSize, maxPositionEmbeddings, typeVocabSize } = TINY_ENCODER_SHAPE;
  return {
    'tokenizer.json': tok['tokenizer.json'],
    'tokenizer_config.json': json({ ...JSON.parse(tok['tokenizer_config.json']), model_max_length: maxPositionEmbeddings, chat_template: undefined }),
    'config.json': json({ architectures: ['BertModel'], model_type: 'bert', hidden_size: hiddenSize, vocab_size: vocabSize, max_position_embeddings: maxPositionEmbeddings, type_vocab_size: typeVocabSize }),
    'modules.json': json(modules),
    '1_Pooling/config.json': json({
      word_embedding_dimension: hiddenSize,
      pooling_mode_cls_token: options.pooling === 'cls',
      pooling_mode_mean_tokens: options.pooling === 'mean',
      pooling_mode_max_tokens: options.pooling === 'max',
      pooling_mode_mean_sqrt_len_tokens: false,
      pooling_mode_weightedmean_tokens: false,
      pooling_mode_lasttoken: options.pooling === 'lasttoken',
      include_prompt: true,
    }),
    'sentence_bert_config.json': json({ max_seq_length: options.maxSeqLength, do_lower_case: false }),
  };
}
