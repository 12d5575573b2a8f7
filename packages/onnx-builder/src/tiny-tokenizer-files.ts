/**
 * The tokenizer and config files of the tiny decoder model (`buildTinyDecoderModel`), in the layout a
 * Hugging Face model folder has: `tokenizer.json` (a GPT-2 style byte-level BPE), `tokenizer_config.json`
 * (special tokens and a ChatML `chat_template`) and `config.json` (architecture sizes, eos/bos ids).
 *
 * Everything is a pure function of the constants below: the merges are learned by a tiny BPE trainer
 * over the built-in `TRAINING_TEXT`, with ties broken by the pair's string, so the bytes are the same on
 * every host and run. This lives in onnx-builder (not @switchyard/llm) because the repository plan writes
 * these files next to model.onnx, and onnx-builder must not depend on llm.
 *
 * Ids: byte b has id b (its GPT-2 `bytes_to_unicode` character as the token string), learned merges
 * follow from 256, and the three special tokens take the last ids, so `vocab_size` counts them.
 */

/** Shape of the tiny model; `config.json` and the ONNX graph are both built from this. */
export interface TinyDecoderShape {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  /** < numHeads: grouped-query attention, numHeads / numKvHeads query heads share one KV head. */
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly maxPositionEmbeddings: number;
  readonly ropeTheta: number;
  readonly rmsNormEps: number;
}

export const TINY_DECODER_SHAPE: TinyDecoderShape = {
  vocabSize: 384,
  hiddenSize: 64,
  intermediateSize: 128,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  maxPositionEmbeddings: 512,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
};

/** Special tokens, in id order at the end of the vocabulary. */
export const TINY_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

/** Token ids of the special tokens for a vocabulary of `vocabSize` (the last three ids). */
export function tinySpecialTokenIds(vocabSize = TINY_DECODER_SHAPE.vocabSize): {
  endoftext: number;
  imStart: number;
  imEnd: number;
} {
  return { endoftext: vocabSize - 3, imStart: vocabSize - 2, imEnd: vocabSize - 1 };
}

/**
 * The ChatML template (as Qwen2 and others ship it, without a default system prompt): every message is
 * `<|im_start|>{role}\n{content}<|im_end|>\n`; the generation prompt opens an assistant turn.
 */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** The text the merges are learned from: plain English plus the words the chat tests use. */
const TRAINING_TEXT = [
  'Hello world! The quick brown fox jumps over the lazy dog. The end of the story is near.',
  'You are a helpful assistant. The user asks a question and the assistant answers it.',
  'What is the capital of France? The capital of France is Paris. What is the time there?',
  'Switchyard serves models: it batches requests, caches the key and value tensors, and streams tokens.',
  'There is nothing in the world that the model does not want to say, and then it says it again.',
  'Numbers like 1, 2, 3, 10, 42 and 2026 appear in the text, and so do the words one, two and three.',
  'In the beginning there was the token, and the token was in the vocabulary, and the vocabulary was small.',
].join('\n');

/** GPT-2's pre-tokenisation regex (the ByteLevel pre-tokenizer with `use_regex: true`). */
const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** GPT-2 `bytes_to_unicode`: byte → a printable character, so every byte string is a plain string. */
export function byteToUnicode(): string[] {
  const printable = (b: number): boolean => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(printable(b) ? b : 256 + n++));
  return out;
}

/** Learn `count` merges (fewer if the text runs out of pairs) over `text`; deterministic. */
function learnMerges(text: string, count: number, byteChars: readonly string[]): Array<[string, string]> {
  const encoder = new TextEncoder();
  const wordFreq = new Map<string, number>();
  for (const m of text.matchAll(GPT2_SPLIT)) wordFreq.set(m[0], (wordFreq.get(m[0]) ?? 0) + 1);
  // Sorted so the result cannot depend on Map insertion order of equal words.
  const words = [...wordFreq.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([w, freq]) => ({ symbols: [...encoder.encode(w)].map((b) => byteChars[b]!), freq }));
  const merges: Array<[string, string]> = [];
  const seen = new Set<string>();
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { symbols, freq } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + freq);
      }
    }
    let best: string | undefined;
    let bestCount = 0;
    for (const [key, c] of pairs) {
      if (seen.has(key)) continue;
      if (c > bestCount || (c === bestCount && best !== undefined && key < best)) {
        best = key;
        bestCount = c;
      }
    }
    if (best === undefined) break;
    seen.add(best);
    const [a, b] = best.split(' ') as [string, string];
    merges.push([a, b]);
    for (const word of words) {
      const s = word.symbols;
      const merged: string[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          merged.push(a + b);
          i++;
        } else merged.push(s[i]!);
      }
      word.symbols = merged;
    }
  }
  return merges;
}

/** The three JSON documents of the tiny model's folder, already serialised (2-space indent, trailing newline). */
export interface TinyTokenizerFiles {
  readonly 'tokenizer.json': string;
  readonly 'tokenizer_config.json': string;
  readonly 'config.json': string;
}

/**
 * Build tokenizer.json, tokenizer_config.json and config.json for a model of `shape`. The vocabulary
 * has exactly `shape.vocabSize` ids: 256 bytes + learned merges + 3 special tokens. Throws when the
 * training text cannot fill the vocabulary (a bug in the constants).
 */
export function buildTinyTokenizerFiles(shape: TinyDecoderShape = TINY_DECODER_SHAPE): TinyTokenizerFiles {
  const byteChars = byteToUnicode();
  const vocab: Record<string, number> = {};
  byteChars.forEach((ch, id) => (vocab[ch] = id));
  const wanted = shape.vocabSize - 256 - TINY_SPECIAL_TOKENS.length;
  if (wanted < 0) throw new Error(`vocab size ${shape.vocabSize} is below 256 bytes + 3 special tokens`);
  // Different merge paths can produce the same string ("a"+"bc", "ab"+"c"): such a merge is kept (BPE
  // needs the rule) but adds no id, so learn until the vocabulary, not the merge list, is full.
  let merges: Array<[string, string]> = [];
  let nextId = 256;
  for (let extra = 0; nextId < 256 + wanted; extra++) {
    merges = learnMerges(TRAINING_TEXT, wanted + extra, byteChars);
    for (const k of Object.keys(vocab)) if (vocab[k]! >= 256) delete vocab[k];
    nextId = 256;
    const kept: Array<[string, string]> = [];
    for (const [a, b] of merges) {
      if (nextId === 256 + wanted) break;
      kept.push([a, b]);
      if (vocab[a + b] === undefined) vocab[a + b] = nextId++;
    }
    merges = kept;
    if (extra > 64) throw new Error('tiny tokenizer: training text too small for the vocabulary');
  }
  const ids = tinySpecialTokenIds(shape.vocabSize);
  const special = [ids.endoftext, ids.imStart, ids.imEnd];
  const addedTokens = TINY_SPECIAL_TOKENS.map((content, i) => ({
    id: special[i]!,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
  const tokenizerConfig = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(addedTokens.map(({ id, ...rest }) => [String(id), rest])),
    bos_token: null,
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    unk_token: null,
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    chat_template: CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    errors: 'replace',
    model_max_length: shape.maxPositionEmbeddings,
    split_special_tokens: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  // Llama-style fields (RMSNorm, RoPE, SwiGLU, GQA, no biases), which is what the graph computes.
  const config = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: shape.vocabSize,
    hidden_size: shape.hiddenSize,
    intermediate_size: shape.intermediateSize,
    num_hidden_layers: shape.numLayers,
    num_attention_heads: shape.numHeads,
    num_key_value_heads: shape.numKvHeads,
    head_dim: shape.headDim,
    hidden_act: 'silu',
    max_position_embeddings: shape.maxPositionEmbeddings,
    rms_norm_eps: shape.rmsNormEps,
    rope_theta: shape.ropeTheta,
    bos_token_id: ids.endoftext,
    eos_token_id: ids.imEnd,
    pad_token_id: ids.endoftext,
    tie_word_embeddings: false,
    torch_dtype: 'float32',
    use_cache: true,
  };
  const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
  return {
    'tokenizer.json': json(tokenizer),
    'tokenizer_config.json': json(tokenizerConfig),
    'config.json': json(config),
  };
}
