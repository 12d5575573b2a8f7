/**
 * Which generated file goes where in the two model repositories of the monorepo:
 * `examples/model_repository` and `test/fixtures/model_repository`. The config.pbtxt files are
 * written by hand and committed; only the files listed here are generated (and git-ignored), by
 * `scripts/generate-models.mjs`.
 */
import { KSERVE_TO_ELEM_TYPE, type KserveDatatype } from './elem-type.js';
import {
  buildAddConstantModel,
  buildIdentityModel,
  buildMlpModel,
  buildSimpleModel,
  buildSimpleStringModel,
  buildSimpleSequenceModel,
  buildSimpleDynaSequenceModel,
  buildTextClassifierModel,
  BATCH_DIM,
} from './models.js';
import { buildTinyDecoderModel } from './tiny-decoder.js';
import { buildTinyEncoderModel, sentenceTransformersFiles, type SentenceTransformersFolderOptions } from './tiny-encoder.js';
import { TINY_DECODER_SHAPE, buildTinyTokenizerFiles, tinySpecialTokenIds } from './tiny-tokenizer-files.js';

/** One generated file: `path` is POSIX, relative to its repository root. */
export interface GeneratedFile {
  readonly path: string;
  build(): Uint8Array;
}

/**
 * KServe datatypes with an `identity_<lowercase name>` fixture model. BF16 is missing on purpose:
 * ORT's CPU kernels handle bfloat16, but onnxruntime-node 1.30 rejects bfloat16 graph inputs and
 * outputs ("Unsupported data type: 16" at session creation), so no BF16 model can be served.
 */
export const IDENTITY_FIXTURE_DATATYPES: readonly KserveDatatype[] = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
];

/** Content of the `corrupt` fixture's model.onnx: not a protobuf ORT can parse. */
export const CORRUPT_MODEL_TEXT = 'this is not an onnx model\n';

const file = (path: string, build: () => Uint8Array): GeneratedFile => ({ path, build });

/** Generated files of `examples/model_repository`. */
export function exampleRepositoryFiles(): GeneratedFile[] {
  return [
    file('simple/1/model.onnx', () => buildSimpleModel()),
    file('simple_int8/1/model.onnx', () => buildSimpleModel({ elemType: 'INT8', graphName: 'simple_int8' })),
    file('simple_identity/1/model.onnx', () => buildIdentityModel('STRING')),
    file('simple_string/1/model.onnx', () => buildSimpleStringModel()),
    file('mlp/1/model.onnx', () => buildMlpModel()),
    file('simple_sequence/1/model.onnx', () => buildSimpleSequenceModel()),
    file('simple_dyna_sequence/1/model.onnx', () => buildSimpleDynaSequenceModel()),
    file('text_classifier/1/model.onnx', () => buildTextClassifierModel()),
    ...llmModelFolder('tiny_llm', 'FLOAT'),
    ...llmModelFolder('mock_llm', null),
    ...embeddingModelFolder('tiny_embedding', { pooling: 'mean', normalize: true, maxSeqLength: 64 }),
  ];
}

/**
 * A sentence-transformers model folder as version 1 of `model`: the tiny encoder's model.onnx plus
 * the tokenizer and sentence-transformers files (tiny-encoder.ts). `matryoshka` lands in config.json
 * as `matryoshka_dimensions`; `tokenTypeIds: false` builds an export without that input.
 */
function embeddingModelFolder(model: string, options: SentenceTransformersFolderOptions & { matryoshka?: number[]; tokenTypeIds?: boolean; pooled?: boolean }): GeneratedFile[] {
  const files = sentenceTransformersFiles(options);
  if (options.matryoshka !== undefined) {
    files['config.json'] = `${JSON.stringify({ ...JSON.parse(files['config.json']!), matryoshka_dimensions: options.matryoshka }, null, 2)}\n`;
  }
  return [
    file(`${model}/1/model.onnx`, () => buildTinyEncoderModel({ tokenTypeIds: options.tokenTypeIds ?? true, pooled: options.pooled ?? false })),
    ...Object.entries(files).map(([name, text]) => file(`${model}/1/${name}`, () => new TextEncoder().encode(text))),
  ];
}

/**
 * Generated files of `test/fixtures/embedding_repository` (hand-written config.pbtxt files beside
 * them): `tiny_embed` (mean pooling, Normalize module, token_type_ids, max_seq_length 32, dynamic
 * batching) and `tiny_embed_cls` (CLS pooling, no Normalize, no token_type_ids, Matryoshka
 * dimensions [8, 16], max_seq_length 64) and `tiny_embed_pooled` (an export that pools itself:
 * `sentence_embedding` = the mean of its `token_embeddings`, although its Pooling module says CLS;
 * Normalize module).
 */
export function embeddingFixtureRepositoryFiles(): GeneratedFile[] {
  return [
    ...embeddingModelFolder('tiny_embed', { pooling: 'mean', normalize: true, maxSeqLength: 32 }),
    ...embeddingModelFolder('tiny_embed_cls', { pooling: 'cls', normalize: false, maxSeqLength: 64, matryoshka: [8, 16], tokenTypeIds: false }),
    ...embeddingModelFolder('tiny_embed_pooled', { pooling: 'cls', normalize: true, maxSeqLength: 32, pooled: true }),
  ];
}

/**
 * A Hugging Face model folder as version 1 of `model`: the tiny decoder's model.onnx (fp32 or fp16 KV;
 * none for a `mocker` model, which needs only the tokenizer) plus tokenizer.json, tokenizer_config.json
 * (ChatML) and config.json.
 */
function llmModelFolder(model: string, kvType: 'FLOAT' | 'FLOAT16' | null): GeneratedFile[] {
  const out: GeneratedFile[] = [];
  if (kvType !== null) out.push(file(`${model}/1/model.onnx`, () => buildTinyDecoderModel({ kvType })));
  for (const name of ['tokenizer.json', 'tokenizer_config.json', 'config.json'] as const) {
    out.push(file(`${model}/1/${name}`, () => new TextEncoder().encode(buildTinyTokenizerFiles()[name])));
  }
  return out;
}

/** Generated files of `test/fixtures/model_repository`. */
export function fixtureRepositoryFiles(): GeneratedFile[] {
  const simple = (): Uint8Array => buildSimpleModel();
  return [
    ...IDENTITY_FIXTURE_DATATYPES.map((dt) =>
      file(`identity_${dt.toLowerCase()}/1/model.onnx`, () => buildIdentityModel(KSERVE_TO_ELEM_TYPE[dt])),
    ),
    file('simple/1/model.onnx', simple),
    file('simple_nobatch/1/model.onnx', () => buildSimpleModel({ dims: [16], graphName: 'simple_nobatch' })),
    ...[1, 2, 3].map((v) => file(`multi_version/${v}/model.onnx`, () => buildAddConstantModel(v, [4]))),
    file('autocomplete/1/model.onnx', () =>
      buildSimpleModel({ elemType: 'FLOAT', dims: [BATCH_DIM, 4], graphName: 'autocomplete' }),
    ),
    file('corrupt/1/model.onnx', () => new TextEncoder().encode(CORRUPT_MODEL_TEXT)),
    file('bad_config/1/model.onnx', simple),
    file('warmup/1/model.onnx', simple),
    file('two_instances/1/model.onnx', simple),
  ];
}

/**
 * Generated files of `test/fixtures/llm_repository` (hand-written config.pbtxt files beside them):
 * each version folder is a Hugging Face model folder (model.onnx for the `llm` backend, tokenizer.json,
 * tokenizer_config.json, config.json). Suites write these files into a temporary copy of the fixture
 * (test/lib/fixture-repository.ts).
 */
export function llmFixtureRepositoryFiles(): GeneratedFile[] {
  return [...llmModelFolder('tiny_llm', 'FLOAT'), ...llmModelFolder('tiny_llm_fp16', 'FLOAT16'), ...llmModelFolder('mock_llm', null)];
}

/** The generation_config.json of `gen_llm`: Qwen3-style end ids (`<|im_end|>`, `<|endoftext|>`), greedy, 6 new tokens. */
export const GEN_LLM_GENERATION_CONFIG = {
  bos_token_id: tinySpecialTokenIds().endoftext,
  eos_token_id: [tinySpecialTokenIds().imEnd, tinySpecialTokenIds().endoftext],
  do_sample: false,
  temperature: 0,
  top_k: 50,
  max_new_tokens: 6,
  transformers_version: '4.51.0',
};

/** The id of the extra added token of `wide_vocab_llm`'s tokenizer: one past the logits, as Gemma 3's `<image_soft_token>`. */
export const WIDE_VOCAB_EXTRA_TOKEN_ID = TINY_DECODER_SHAPE.vocabSize;

/**
 * Generated files of `test/fixtures/llm_variants_repository`: model folders real exports have and the
 * plain fixture does not, beside `plain_llm` (tiny_llm's files, to compare with) — `gen_llm` and `gen_llm_vllm` (a generation_config.json), `merged_llm`
 * (Optimum's `decoder_model_merged.onnx` with its `use_cache_branch` input; same weights as
 * tiny_llm), `wide_vocab_llm` (a tokenizer with one id more than the logits, config.json's vocab_size
 * the logits' width) and `bad_gen_llm` (a generation_config.json that is not JSON).
 */
export function llmVariantRepositoryFiles(): GeneratedFile[] {
  const text = (s: string): Uint8Array => new TextEncoder().encode(s);
  const json = (v: unknown): Uint8Array => text(`${JSON.stringify(v, null, 2)}\n`);
  const tokenizer = buildTinyTokenizerFiles();
  const wide = JSON.parse(tokenizer['tokenizer.json']) as { added_tokens: object[] };
  wide.added_tokens.push({ id: WIDE_VOCAB_EXTRA_TOKEN_ID, content: '<image_soft_token>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return [
    ...llmModelFolder('plain_llm', 'FLOAT'),
    ...llmModelFolder('gen_llm', 'FLOAT'),
    file('gen_llm/1/generation_config.json', () => json(GEN_LLM_GENERATION_CONFIG)),
    ...llmModelFolder('gen_llm_vllm', 'FLOAT'),
    file('gen_llm_vllm/1/generation_config.json', () => json(GEN_LLM_GENERATION_CONFIG)),
    ...llmModelFolder('merged_llm', null),
    file('merged_llm/1/decoder_model_merged.onnx', () => buildTinyDecoderModel({ useCacheBranch: true })),
    ...llmModelFolder('wide_vocab_llm', 'FLOAT').filter((f) => !f.path.endsWith('tokenizer.json')),
    file('wide_vocab_llm/1/tokenizer.json', () => json(wide)),
    ...llmModelFolder('bad_gen_llm', 'FLOAT'),
    file('bad_gen_llm/1/generation_config.json', () => text('{"eos_token_id": [1, 2,')),
  ];
}
