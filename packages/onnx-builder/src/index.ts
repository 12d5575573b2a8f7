// @switchyard/onnx-builder: build ONNX models deterministically, for examples, tests and benchmarks.
export {
  ElemType,
  KSERVE_TO_ELEM_TYPE,
  elemByteSize,
  encodeRawData,
  float16Bits,
  bfloat16Bits,
  type ElemTypeName,
  type KserveDatatype,
  type NumericValues,
} from './elem-type.js';
export {
  GraphBuilder,
  floatAttr,
  floatsAttr,
  stringsAttr,
  tensorAttr,
  DEFAULT_OPSET,
  DEFAULT_IR_VERSION,
  DEFAULT_PRODUCER,
  type Dim,
  type AttrValue,
  type TypedAttr,
  type TensorInit,
  type BuildModelOptions,
} from './graph-builder.js';
export { decodeModelProto, encodeModelProto } from './onnx-proto.js';
export { GEMMA3_CHAT_TEMPLATE, LLAMA3_CHAT_TEMPLATE, MISTRAL_CHAT_TEMPLATE, QWEN3_CHAT_TEMPLATE } from './family-chat-templates.js';
export { buildFamilyModelFiles, MODEL_FAMILIES, type FamilyModelFiles, type ModelFamily } from './family-tokenizer-files.js';
export { mulberry32, uniformFloats } from './prng.js';
export {
  BATCH_DIM,
  buildSimpleModel,
  buildSimpleStringModel,
  buildIdentityModel,
  buildAddConstantModel,
  buildMlpModel,
  buildTextClassifierModel,
  textTokenId,
  TEXT_CLASSIFIER,
  type SimpleModelOptions,
  type MlpModelOptions,
} from './models.js';
export {
  exampleRepositoryFiles,
  fixtureRepositoryFiles,
  llmFixtureRepositoryFiles,
  embeddingFixtureRepositoryFiles,
  IDENTITY_FIXTURE_DATATYPES,
  CORRUPT_MODEL_TEXT,
  type GeneratedFile,
  GEN_LLM_GENERATION_CONFIG,
  WIDE_VOCAB_EXTRA_TOKEN_ID,
  llmVariantRepositoryFiles,
} from './repository-plan.js';
export { buildScriptedDecoderModel, type ScriptedDecoderOptions } from './scripted-decoder.js';
export { buildRealVocabDecoder, realVocabRepositoryFiles, REAL_VOCAB_MODELS, type RealVocabModel, type RealVocabModelName } from './real-vocab-models.js';
export {
  buildTinyDecoderModel,
  pastKeyName,
  pastValueName,
  presentKeyName,
  presentValueName,
  type TinyDecoderOptions,
} from './tiny-decoder.js';
export {
  buildTinyTokenizerFiles,
  byteToUnicode,
  tinySpecialTokenIds,
  CHATML_TEMPLATE,
  TINY_DECODER_SHAPE,
  TINY_SPECIAL_TOKENS,
  type TinyDecoderShape,
  type TinyTokenizerFiles,
} from './tiny-tokenizer-files.js';
export {
  buildTinyEncoderModel,
  sentenceTransformersFiles,
  TINY_ENCODER_SHAPE,
  type TinyEncoderOptions,
  type TinyEncoderShape,
  type TinyPoolingMode,
  type SentenceTransformersFolderOptions,
} from './tiny-encoder.js';
