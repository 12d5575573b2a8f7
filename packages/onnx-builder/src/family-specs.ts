/**
 * What distinguishes the four families of `family-tokenizer-files.ts`: their added tokens (real ids,
 * real `special` flags), widths, pre-tokenizers, tokenizer_config.json / config.json /
 * generation_config.json fields (the shapes and values of the real exports, sizes of a small member of
 * each family), chat template, and the turn markers a scripted decoder counts from.
 */
import { GEMMA3_CHAT_TEMPLATE, LLAMA3_CHAT_TEMPLATE, MISTRAL_CHAT_TEMPLATE, QWEN3_CHAT_TEMPLATE } from './family-chat-templates.js';

export type ModelFamily = 'qwen3' | 'llama3' | 'mistral' | 'gemma3';
export const MODEL_FAMILIES: readonly ModelFamily[] = ['qwen3', 'llama3', 'mistral', 'gemma3'];

export interface AddedToken {
  readonly id: number;
  readonly content: string;
  readonly special: boolean;
}

/** Qwen2/3 and Llama 3 pre-tokenisation patterns (Llama 3 groups up to three digits, Qwen one). */
const QWEN2_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/** The same patterns in JavaScript, for the corpus and `encode` (no inline `(?i:…)` before V8 12.5). */
export const JS_SPLIT: Record<'qwen' | 'llama' | 'gpt2', RegExp> = {
  qwen: /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu,
  llama: /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu,
  gpt2: /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu,
};

const splitThenByteLevel = (pattern: string): object => ({
  type: 'Sequence',
  pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
  ],
});
const GPT2_BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };


export interface FamilySpec {
  readonly added: readonly AddedToken[];
  readonly tokenizerSize: number;
  readonly vocabSize: number;
  readonly split: 'qwen' | 'llama' | 'gpt2';
  readonly seed: number;
  readonly template: string;
  readonly tokenizerJson: (model: object, added: readonly AddedToken[]) => object;
  readonly tokenizerConfig: object;
  readonly config: object;
  readonly generationConfig: object;
  readonly chatTemplateFile: boolean;
  readonly turnMarker: string;
  readonly afterTurnMarker: string;
  readonly endOfTurn: string;
}

const tokens = (first: number, contents: readonly string[], special = true): AddedToken[] => contents.map((content, i) => ({ id: first + i, content, special }));

const QWEN3_ADDED: AddedToken[] = [
  ...tokens(151643, ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>']),
  // Qwen's tool, fill-in-the-middle and thinking markers are added tokens that are not special: they
  // survive skip_special_tokens, so parsers read them in the text.
  ...tokens(151657, ['<tool_call>', '</tool_call>', '<|fim_prefix|>', '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>', '<tool_response>', '</tool_response>', '<think>', '</think>'], false),
];

const LLAMA3_ADDED: AddedToken[] = [
  ...tokens(128000, ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>', '<|reserved_special_token_1|>', '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>', '<|start_header_id|>', '<|end_header_id|>', '<|eom_id|>', '<|eot_id|>', '<|python_tag|>']),
  ...Array.from({ length: 128256 - 128011 }, (_, i) => ({ id: 128011 + i, content: `<|reserved_special_token_${3 + i}|>`, special: true })),
];

const MISTRAL_ADDED: AddedToken[] = [
  ...tokens(0, ['<unk>', '<s>', '</s>', '[INST]', '[/INST]', '[TOOL_CALLS]', '[AVAILABLE_TOOLS]', '[/AVAILABLE_TOOLS]', '[TOOL_RESULTS]', '[/TOOL_RESULTS]']),
  ...Array.from({ length: 771 - 10 }, (_, i) => ({ id: 10 + i, content: `[control_${8 + i}]`, special: true })),
];

const GEMMA3_ADDED: AddedToken[] = [
  ...tokens(0, ['<pad>', '<eos>', '<bos>', '<unk>', '<mask>', '[@BOS@]']),
  ...Array.from({ length: 99 }, (_, i) => ({ id: 6 + i, content: `<unused${i}>`, special: true })),
  ...tokens(105, ['<start_of_turn>', '<end_of_turn>']),
  ...tokens(255999, ['<start_of_image>', '<end_of_image>']),
  ...tokens(262144, ['<image_soft_token>']),
];

export const addedTokensDecoder = (added: readonly AddedToken[]): object =>
  Object.fromEntries(added.map((t) => [String(t.id), { content: t.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: t.special }]));

export const bpeModel = (vocab: Record<string, number>, merges: string[][], ignoreMerges: boolean): object => ({
  type: 'BPE',
  dropout: null,
  unk_token: null,
  continuing_subword_prefix: null,
  end_of_word_suffix: null,
  fuse_unk: false,
  byte_fallback: false,
  ignore_merges: ignoreMerges,
  vocab,
  merges,
});

const tokenizerJson = (added: readonly AddedToken[], rest: object): object => ({
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: added.map((t) => ({ id: t.id, content: t.content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: t.special })),
  ...rest,
});

const bosProcessor = (bos: string, id: number): object => ({
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
});

export function spec(family: ModelFamily): FamilySpec {
  switch (family) {
    case 'qwen3':
      return {
        added: QWEN3_ADDED,
        tokenizerSize: 151669,
        vocabSize: 151936,
        split: 'qwen',
        seed: 3,
        template: QWEN3_CHAT_TEMPLATE,
        tokenizerJson: (model, added) =>
          tokenizerJson(added, {
            normalizer: { type: 'NFC' },
            pre_tokenizer: splitThenByteLevel(QWEN2_SPLIT),
            post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
            decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
            model,
          }),
        tokenizerConfig: {
          add_bos_token: false,
          add_prefix_space: false,
          additional_special_tokens: ['<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>', '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>'],
          bos_token: null,
          clean_up_tokenization_spaces: false,
          eos_token: '<|im_end|>',
          errors: 'replace',
          model_max_length: 131072,
          pad_token: '<|endoftext|>',
          split_special_tokens: false,
          tokenizer_class: 'Qwen2Tokenizer',
          unk_token: null,
        },
        config: {
          architectures: ['Qwen3ForCausalLM'],
          model_type: 'qwen3',
          vocab_size: 151936,
          hidden_size: 1024,
          intermediate_size: 3072,
          num_hidden_layers: 28,
          num_attention_heads: 16,
          num_key_value_heads: 8,
          head_dim: 128,
          hidden_act: 'silu',
          max_position_embeddings: 40960,
          rms_norm_eps: 1e-6,
          rope_theta: 1000000,
          bos_token_id: 151643,
          eos_token_id: 151645,
          tie_word_embeddings: true,
          torch_dtype: 'bfloat16',
          use_cache: true,
        },
        generationConfig: { bos_token_id: 151643, do_sample: true, eos_token_id: [151645, 151643], pad_token_id: 151643, temperature: 0.6, top_k: 20, top_p: 0.95, transformers_version: '4.51.0' },
        chatTemplateFile: false,
        turnMarker: '<|im_start|>',
        afterTurnMarker: 'assistant\n',
        endOfTurn: '<|im_end|>',
      };
    case 'llama3':
      return {
        added: LLAMA3_ADDED,
        tokenizerSize: 128256,
        vocabSize: 128256,
        split: 'llama',
        seed: 31,
        template: LLAMA3_CHAT_TEMPLATE,
        tokenizerJson: (model, added) =>
          tokenizerJson(added, {
            normalizer: null,
            pre_tokenizer: splitThenByteLevel(LLAMA3_SPLIT),
            post_processor: {
              type: 'Sequence',
              processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, bosProcessor('<|begin_of_text|>', 128000)],
            },
            decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
            model,
          }),
        tokenizerConfig: {
          bos_token: '<|begin_of_text|>',
          clean_up_tokenization_spaces: true,
          eos_token: '<|eot_id|>',
          model_input_names: ['input_ids', 'attention_mask'],
          model_max_length: 131072,
          tokenizer_class: 'PreTrainedTokenizerFast',
        },
        // config.json names only <|eot_id|> (as Llama 3 8B Instruct's does); generation_config.json adds 3.1's other two.
        config: {
          architectures: ['LlamaForCausalLM'],
          model_type: 'llama',
          vocab_size: 128256,
          hidden_size: 2048,
          intermediate_size: 8192,
          num_hidden_layers: 16,
          num_attention_heads: 32,
          num_key_value_heads: 8,
          head_dim: 64,
          hidden_act: 'silu',
          max_position_embeddings: 131072,
          rms_norm_eps: 1e-5,
          rope_theta: 500000,
          rope_scaling: { factor: 32, high_freq_factor: 4, low_freq_factor: 1, original_max_position_embeddings: 8192, rope_type: 'llama3' },
          bos_token_id: 128000,
          eos_token_id: 128009,
          tie_word_embeddings: true,
          torch_dtype: 'bfloat16',
          use_cache: true,
        },
        generationConfig: { bos_token_id: 128000, do_sample: true, eos_token_id: [128001, 128008, 128009], temperature: 0.6, top_p: 0.9, transformers_version: '4.45.0' },
        chatTemplateFile: false,
        turnMarker: '<|start_header_id|>',
        afterTurnMarker: 'assistant<|end_header_id|>\n\n',
        endOfTurn: '<|eot_id|>',
      };
    case 'mistral':
      return {
        added: MISTRAL_ADDED,
        tokenizerSize: 32768,
        vocabSize: 32768,
        split: 'gpt2',
        seed: 7,
        template: MISTRAL_CHAT_TEMPLATE,
        tokenizerJson: (model, added) =>
          tokenizerJson(added, {
            normalizer: null,
            pre_tokenizer: GPT2_BYTE_LEVEL,
            post_processor: bosProcessor('<s>', 1),
            decoder: GPT2_BYTE_LEVEL,
            model,
          }),
        tokenizerConfig: {
          add_bos_token: true,
          add_eos_token: false,
          bos_token: '<s>',
          clean_up_tokenization_spaces: false,
          eos_token: '</s>',
          legacy: false,
          model_max_length: 32768,
          pad_token: null,
          tokenizer_class: 'LlamaTokenizer',
          unk_token: '<unk>',
        },
        config: {
          architectures: ['MistralForCausalLM'],
          model_type: 'mistral',
          vocab_size: 32768,
          hidden_size: 4096,
          intermediate_size: 14336,
          num_hidden_layers: 32,
          num_attention_heads: 32,
          num_key_value_heads: 8,
          head_dim: 128,
          hidden_act: 'silu',
          max_position_embeddings: 32768,
          rms_norm_eps: 1e-5,
          rope_theta: 1000000,
          sliding_window: null,
          bos_token_id: 1,
          eos_token_id: 2,
          tie_word_embeddings: false,
          torch_dtype: 'bfloat16',
          use_cache: true,
        },
        generationConfig: { bos_token_id: 1, eos_token_id: 2, transformers_version: '4.42.0' },
        chatTemplateFile: false,
        turnMarker: '[/INST]',
        afterTurnMarker: '',
        endOfTurn: '</s>',
      };
    case 'gemma3':
      return {
        added: GEMMA3_ADDED,
        tokenizerSize: 262145,
        vocabSize: 262144,
        split: 'gpt2',
        seed: 262,
        template: GEMMA3_CHAT_TEMPLATE,
        tokenizerJson: (model, added) =>
          tokenizerJson(added, {
            normalizer: null,
            pre_tokenizer: GPT2_BYTE_LEVEL,
            post_processor: bosProcessor('<bos>', 2),
            decoder: GPT2_BYTE_LEVEL,
            model,
          }),
        tokenizerConfig: {
          add_bos_token: true,
          add_eos_token: false,
          boi_token: '<start_of_image>',
          bos_token: '<bos>',
          clean_up_tokenization_spaces: false,
          eoi_token: '<end_of_image>',
          eos_token: '<eos>',
          image_token: '<image_soft_token>',
          model_max_length: 1000000000000000019884624838656,
          pad_token: '<pad>',
          spaces_between_special_tokens: false,
          tokenizer_class: 'GemmaTokenizer',
          unk_token: '<unk>',
          use_default_system_prompt: false,
        },
        config: {
          architectures: ['Gemma3ForCausalLM'],
          model_type: 'gemma3_text',
          vocab_size: 262144,
          hidden_size: 1152,
          intermediate_size: 6912,
          num_hidden_layers: 26,
          num_attention_heads: 4,
          num_key_value_heads: 1,
          head_dim: 256,
          hidden_activation: 'gelu_pytorch_tanh',
          max_position_embeddings: 32768,
          rms_norm_eps: 1e-6,
          rope_theta: 1000000,
          sliding_window: 512,
          bos_token_id: 2,
          eos_token_id: [1, 106],
          pad_token_id: 0,
          torch_dtype: 'bfloat16',
          use_cache: true,
        },
        generationConfig: { bos_token_id: 2, cache_implementation: 'hybrid', do_sample: true, eos_token_id: [1, 106], pad_token_id: 0, top_k: 64, top_p: 0.95, transformers_version: '4.50.0' },
        chatTemplateFile: true,
        turnMarker: '<start_of_turn>',
        afterTurnMarker: 'model\n',
        endOfTurn: '<end_of_turn>',
      };
  }
}
