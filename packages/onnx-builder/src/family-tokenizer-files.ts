/**
 * Model folders of four real model families at their real widths, for decoders that must be served
 * like the real exports: `tokenizer.json` (byte-level BPE), `tokenizer_config.json` (added tokens,
 * special token strings, the chat template, or `chat_template.jinja` beside it as newer exports have),
 * `config.json` (`vocab_size`: the logits' width, end and begin ids) and `generation_config.json`
 * (end ids, sampling defaults), with every added token at its real id and with its real `special` flag:
 *
 * | family  | tokenizer ids | config vocab_size | end ids: config.json → generation_config.json |
 * |---------|---------------|-------------------|------------------------------------------------|
 * | qwen3   | 151,669 (added 151643–151668) | 151,936 (a padded LM head) | 151645 → 151645, 151643 |
 * | llama3  | 128,256 (added 128000–128255) | 128,256 | 128009 → 128001, 128008, 128009 |
 * | mistral | 32,768 (added 0–770, v3's control tokens) | 32,768 | 2 → 2 |
 * | gemma3  | 262,145 (`<image_soft_token>` 262144) | 262,144 (one id narrower) | 1, 106 → 1, 106 |
 *
 * The regular vocabulary is synthetic and a pure function of the family: the 256 byte tokens (GPT-2's
 * byte-to-character table), then words of a built-in corpus (the templates' and tool schemas' words,
 * so a rendered prompt is a few hundred tokens, not thousands), then seeded pseudo-words and numbers
 * until every free id is used. Each token past the bytes is one merge of a shorter token and one
 * character, so the merges are a valid BPE and every token is reachable. Building the widest family
 * takes about a second of CPU; its tokenizer.json is 8 MB (Qwen3's 4.6 MB).
 */
import { GEMMA3_CHAT_TEMPLATE, LLAMA3_CHAT_TEMPLATE, MISTRAL_CHAT_TEMPLATE, QWEN3_CHAT_TEMPLATE } from './family-chat-templates.js';
import { mulberry32 } from './prng.js';
import { byteToUnicode } from './tiny-tokenizer-files.js';

export type ModelFamily = 'qwen3' | 'llama3' | 'mistral' | 'gemma3';
export const MODEL_FAMILIES: readonly ModelFamily[] = ['qwen3', 'llama3', 'mistral', 'gemma3'];

/** A family's folder, its widths and the ids a scripted decoder needs. */
export interface FamilyModelFiles {
  readonly family: ModelFamily;
  /** File name → content (tokenizer.json, tokenizer_config.json, config.json, generation_config.json, and chat_template.jinja for gemma3). */
  readonly files: Readonly<Record<string, string>>;
  /** config.json's vocab_size: the width the decoder's logits must have. */
  readonly vocabSize: number;
  /** One more than the largest token id of tokenizer.json. */
  readonly tokenizerSize: number;
  /** Every added token's content → id. */
  readonly addedTokenIds: Readonly<Record<string, number>>;
  /** The token that opens the generation prompt's turn (the scripted decoder's marker). */
  readonly turnMarker: string;
  /** What the generation prompt renders after `turnMarker` (its tokens are the decoder's offset). */
  readonly afterTurnMarker: string;
  /** The token that ends an assistant turn in this family's template. */
  readonly endOfTurn: string;
  /**
   * `text`'s token ids as the tokenizer encodes it (no BOS added): added tokens written in the text
   * match as one id, the rest is pre-tokenized by the family's pattern and merged by rank (BPE). Lets
   * a scripted decoder's reply be built without loading tokenizer.json in a tokenizer library.
   */
  encode(text: string): number[];
}

interface AddedToken {
  readonly id: number;
  readonly content: string;
  readonly special: boolean;
}

/** Qwen2/3 and Llama 3 pre-tokenisation patterns (Llama 3 groups up to three digits, Qwen one). */
const QWEN2_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/** The same patterns for the corpus split here (JavaScript has no inline `(?i:…)` before V8 12.5). */
const JS_SPLIT: Record<'qwen' | 'llama' | 'gpt2', RegExp> = {
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

/** Text whose words become whole tokens: what the templates render and the tools and replies the tests use. */
const CORPUS = [
  'You are a helpful assistant. The user asks a question and the assistant answers it.',
  'What is the weather in Paris today? Weather and time in Paris? The weather in Paris is sunny, 21 degrees.',
  'Checking the weather. Let me look up the forecast. The user wants the weather and the time.',
  '{"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "array"}}, "required": ["city"]}}}',
  '{"name": "get_time", "arguments": {"tz": "CET"}} {"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}',
  '[get_weather(city=\'Paris\', days=(1, 2)), get_time(tz="CET")] {"city": "Paris", "temperature": 21, "sunny": true}',
  'Answer with a function call from the list below, as JSON in the form of name and parameters. Use no variables.',
  'These functions are available to help with the request. Their signatures, inside tools XML tags.',
  'To call a function, answer a JSON object with its name and arguments inside tool_call XML tags.',
  'You may call these functions. To call them, answer only a Python list of calls: func_name param value',
  'Environment: ipython Cutting Knowledge Date: December 2023 Today Date: 26 Jul 2024 system user assistant model',
].join('\n');

interface FamilySpec {
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

const addedTokensDecoder = (added: readonly AddedToken[]): object =>
  Object.fromEntries(added.map((t) => [String(t.id), { content: t.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: t.special }]));

const bpeModel = (vocab: Record<string, number>, merges: string[][], ignoreMerges: boolean): object => ({
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

function spec(family: ModelFamily): FamilySpec {
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

/**
 * The regular vocabulary: `ids` (ascending, the ids no added token takes) filled with the 256 byte
 * tokens, the corpus's words, then pseudo-words; and the merges that build them.
 */
function regularVocabulary(ids: readonly number[], split: RegExp, seed: number, extraText: string): { vocab: Record<string, number>; merges: string[][] } {
  const byteChars = byteToUnicode();
  const encoder = new TextEncoder();
  const vocab = new Map<string, number>();
  const merges: string[][] = [];
  let next = 0;
  const full = (): boolean => next >= ids.length;
  for (const ch of byteChars) vocab.set(ch, ids[next++]!);
  /** Adds the merges that build `symbols` left to right (each prefix and its next character). */
  const addWord = (symbols: readonly string[]): void => {
    let prefix = symbols[0]!;
    for (let i = 1; i < symbols.length && !full(); i++) {
      const merged = prefix + symbols[i]!;
      if (!vocab.has(merged)) {
        vocab.set(merged, ids[next++]!);
        merges.push([prefix, symbols[i]!]);
      }
      prefix = merged;
    }
  };
  const byteSymbols = (text: string): string[] => [...encoder.encode(text)].map((b) => byteChars[b]!);

  // The corpus's words, most frequent first (ties by the word), then whitespace runs.
  const counts = new Map<string, number>();
  for (const m of `${CORPUS}\n${extraText}`.matchAll(split)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
  const words = [...counts.entries()].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0)).map(([w]) => w);
  for (const w of words) addWord(byteSymbols(w));
  for (const ws of [' ', '\n', '\t']) addWord(byteSymbols(ws.repeat(16)));

  // Numbers, then pseudo-words: syllables with and without a leading space, seeded.
  for (let n = 0; n < 1000; n++) addWord(byteSymbols(String(n)));
  const rand = mulberry32(seed);
  const consonants = 'bcdfghjklmnprstvwyzbcdlmnrst';
  const vowels = 'aeiouaeioy';
  const pick = (s: string): string => s[Math.floor(rand() * s.length)]!;
  while (!full()) {
    const syllables = 1 + Math.floor(rand() * 4);
    let w = '';
    for (let s = 0; s < syllables; s++) w += pick(consonants) + pick(vowels) + (rand() < 0.4 ? pick(consonants) : '');
    if (rand() < 0.2) w = w[0]!.toUpperCase() + w.slice(1);
    addWord(byteSymbols(rand() < 0.6 ? ` ${w}` : w));
  }
  return { vocab: Object.fromEntries(vocab), merges };
}

const memo = new Map<ModelFamily, FamilyModelFiles>();

/** The folder of `family`, built once per process (the widest, Gemma 3's, in about 1 s of CPU). */
export function buildFamilyModelFiles(family: ModelFamily): FamilyModelFiles {
  const cached = memo.get(family);
  if (cached !== undefined) return cached;
  const s = spec(family);
  const taken = new Set(s.added.map((t) => t.id));
  const ids: number[] = [];
  for (let id = 0; id < s.tokenizerSize; id++) if (!taken.has(id)) ids.push(id);
  const { vocab, merges } = regularVocabulary(ids, JS_SPLIT[s.split], s.seed, s.template);
  const model = bpeModel(vocab, merges, family === 'llama3');
  const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
  const tokenizerConfig = {
    ...s.tokenizerConfig,
    added_tokens_decoder: addedTokensDecoder(s.added),
    ...(s.chatTemplateFile ? {} : { chat_template: s.template }),
  };
  const files: Record<string, string> = {
    // The vocabulary and merges on one line each entry would make 20 MB; compact like the exports' own JSON is not needed.
    'tokenizer.json': JSON.stringify(s.tokenizerJson(model, s.added)),
    'tokenizer_config.json': json(tokenizerConfig),
    'config.json': json(s.config),
    'generation_config.json': json(s.generationConfig),
  };
  if (s.chatTemplateFile) files['chat_template.jinja'] = s.template;
  const encode = bpeEncoder(vocab, merges, s.added, JS_SPLIT[s.split], family === 'qwen3', family === 'llama3');
  const built: FamilyModelFiles = {
    family,
    files,
    vocabSize: s.vocabSize,
    tokenizerSize: s.tokenizerSize,
    addedTokenIds: Object.fromEntries(s.added.map((t) => [t.content, t.id])),
    turnMarker: s.turnMarker,
    afterTurnMarker: s.afterTurnMarker,
    endOfTurn: s.endOfTurn,
    encode,
  };
  memo.set(family, built);
  return built;
}

/** Byte-level BPE encoding over `vocab` and `merges` (see `FamilyModelFiles.encode`). */
function bpeEncoder(
  vocab: Readonly<Record<string, number>>,
  merges: readonly string[][],
  added: readonly AddedToken[],
  split: RegExp,
  nfc: boolean,
  ignoreMerges: boolean,
): (text: string) => number[] {
  const byteChars = byteToUnicode();
  const encoder = new TextEncoder();
  let ranks: Map<string, number> | undefined; // at the first encode: writing the files needs none
  const byContent = [...added].sort((a, b) => b.content.length - a.content.length);
  const word = (piece: string): number[] => {
    if (ranks === undefined) {
      ranks = new Map();
      for (let rank = 0; rank < merges.length; rank++) ranks.set(`${merges[rank]![0]} ${merges[rank]![1]}`, rank);
    }
    const whole = [...encoder.encode(piece)].map((b) => byteChars[b]!).join('');
    if (ignoreMerges && vocab[whole] !== undefined) return [vocab[whole]];
    let symbols = [...encoder.encode(piece)].map((b) => byteChars[b]!);
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = ranks!.get(`${symbols[i]} ${symbols[i + 1]}`);
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best < 0) break;
      const [a, b] = [symbols[best]!, symbols[best + 1]!];
      const next: string[] = [];
      for (let i = 0; i < symbols.length; i++) {
        if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) next.push(symbols[i++]! + b);
        else next.push(symbols[i]!);
      }
      symbols = next;
    }
    return symbols.map((sym) => vocab[sym]!);
  };
  return (text) => {
    const ids: number[] = [];
    let plain = '';
    const flush = (): void => {
      const normalized = nfc ? plain.normalize('NFC') : plain;
      for (const m of normalized.matchAll(split)) ids.push(...word(m[0]));
      plain = '';
    };
    for (let i = 0; i < text.length; ) {
      const hit = byContent.find((t) => text.startsWith(t.content, i));
      if (hit === undefined) {
        plain += text[i++];
        continue;
      }
      flush();
      ids.push(hit.id);
      i += hit.content.length;
    }
    flush();
    return ids;
  };
}
