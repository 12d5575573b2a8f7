/**
 * `Tokenizer`: a typed adapter over @huggingface/tokenizers (a pure-JS implementation of Hugging Face
 * `tokenizer.json`, working offline). The package's own .d.ts uses extension-less relative imports, which
 * NodeNext resolution cannot follow, so its types silently become `any`; this file declares the small
 * surface we use (`HfTokenizer`) and is the only place that touches the package.
 *
 * Encoding never adds a BOS/EOS on its own unless `addSpecialTokens` asks for the tokenizer's post
 * processor; special tokens written in the text (`<|im_start|>`) are matched as one id each, which is
 * what a rendered chat template needs. Decoding never applies `clean_up_tokenization_spaces`, so
 * `decode(encode(s)) === s` for byte-level BPE. Instances are immutable and safe to share.
 */
import * as tokenizers from '@huggingface/tokenizers';
import { invalidArgument } from '@switchyard/common';
import { ByteLevelDecoder, type ByteLevelParts } from './byte-level-decoder.js';
import { installFastByteLevel } from './byte-level-pretokenizer.js';
import { tokenByteBound } from '../context-length.js';
import { sharedPreprocessPool } from '../preprocess-pool.js';
import { WeakValueCache } from '../weak-value-cache.js';
import {
  readModelFolder,
  specialTokenContent,
  type ModelFolderFiles,
  type ModelConfigJson,
  type TokenizerConfigJson,
  type TokenizerJson,
} from './tokenizer-files.js';

/** The subset of @huggingface/tokenizers' `Tokenizer` this adapter calls (see the file comment). */
interface HfTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  decode(ids: number[], options?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean | null }): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
  /**
   * The library's model (its `TokenizerModel`): `vocab` maps id → token (vocabulary and added tokens),
   * `tokens_to_ids` token → id (the same). Read once at construction: iterating these is far cheaper
   * than iterating the parsed JSON vocabulary, a dictionary-mode object of up to 262k keys (~0.2 s each pass).
   */
  readonly model: { readonly vocab: ReadonlyArray<string | undefined>; readonly tokens_to_ids: ReadonlyMap<string, number> } | null;
  /**
   * What `decode` uses, read once to build a `ByteLevelDecoder` when the decoder is the byte-level one:
   * the decoder (its config, byte table and end-of-word suffix), every added token, and the token strings
   * `skip_special_tokens` drops.
   */
  readonly decoder?: { readonly config?: { readonly type?: unknown }; readonly byte_decoder?: unknown; readonly end_of_word_suffix?: unknown } | null;
  readonly added_tokens?: ReadonlyArray<{ readonly content?: unknown }>;
  readonly special_tokens?: readonly unknown[];
  /** The pre-tokenizer, given the fast byte-level path where it is the byte-level one (byte-level-pretokenizer.ts). */
  readonly pre_tokenizer?: unknown;
}

/**
 * The library's decoding parts when its decoder is exactly the byte-level one over a mapped vocabulary,
 * for `ByteLevelDecoder`; undefined otherwise (decode then always asks the library).
 */
function byteLevelParts(hf: HfTokenizer, mapped: NonNullable<HfTokenizer['model']> | undefined): ByteLevelParts | undefined {
  const d = hf.decoder;
  if (mapped === undefined || d === null || d === undefined || d.config?.type !== 'ByteLevel') return undefined;
  if (d.end_of_word_suffix) return undefined; // the library rewrites a (non-empty) suffix after decoding
  if (typeof d.byte_decoder !== 'object' || d.byte_decoder === null) return undefined;
  const added = hf.added_tokens;
  const special = hf.special_tokens;
  if (!Array.isArray(added) || !Array.isArray(special)) return undefined;
  if (!added.every((t) => typeof t.content === 'string') || !special.every((t) => typeof t === 'string')) return undefined;
  return {
    vocab: mapped.vocab,
    addedContents: added.map((t) => t.content as string),
    specialContents: special as string[],
    byteDecoder: d.byte_decoder as Record<string, number | string>,
  };
}

/** Model types whose JSON vocabulary (token → id object) the library's model holds as is, added tokens put on top. */
const MAPPED_VOCAB_MODELS: ReadonlySet<unknown> = new Set(['BPE', 'WordPiece']);
type HfTokenizerConstructor = new (tokenizerJson: object, tokenizerConfig: object) => HfTokenizer;
const HfTokenizerClass = (tokenizers as unknown as { Tokenizer: HfTokenizerConstructor }).Tokenizer;

export interface EncodeOptions {
  /** Run the tokenizer's post processor (adds BOS/EOS where the tokenizer defines them). Default false. */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  /** Drop special tokens (`<|im_end|>` etc.) from the text. Default false. */
  skipSpecialTokens?: boolean;
}

/** Texts from this many UTF-16 units are tokenized on the preprocessing threads by `encodeOffLoop`. */
export const OFF_LOOP_TOKENIZE_CHARS = 32 * 1024;

/**
 * The library's model when it holds the JSON vocabulary as is (BPE, WordPiece: token → id map and
 * id → token array, added tokens on top) with integer ids; undefined otherwise (the JSON is read).
 */
function mappedVocab(hf: HfTokenizer, tokenizerJson: TokenizerJson): NonNullable<HfTokenizer['model']> | undefined {
  const model = hf.model;
  if (model === null || model === undefined || !MAPPED_VOCAB_MODELS.has(tokenizerJson.model.type)) return undefined;
  if (!Array.isArray(model.vocab) || !(model.tokens_to_ids instanceof Map)) return undefined;
  // The array holds every id only when every id is an array index: check the library's map, not the JSON.
  for (const id of model.tokens_to_ids.values()) if (!Number.isInteger(id) || id < 0 || id >= 2 ** 32 - 1) return undefined;
  return model;
}

/** Tokenizers by `ModelFolderFiles.tokenizerKey`, while held (`fromModelFolderFiles`). */
const sharedTokenizers = new WeakValueCache<Tokenizer>();

export class Tokenizer {
  /** Ids of all special added tokens (`special: true` in tokenizer.json). */
  readonly specialTokenIds: ReadonlySet<number>;
  /** End-of-sequence ids: tokenizer_config's eos_token, plus config.json's eos_token_id(s). May be empty. */
  readonly eosTokenIds: ReadonlySet<number>;
  /** undefined when the tokenizer has none. */
  readonly bosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  /** One more than the largest id in the vocabulary or added tokens: the logits width a model must have. */
  readonly vocabSize: number;
  /**
   * The most input bytes one token can cover, when the tokenizer guarantees such a bound (see
   * `tokenByteBound`): a text of B UTF-8 bytes then has at least ⌈B / maxTokenBytes⌉ tokens.
   * undefined when it gives none.
   */
  readonly maxTokenBytes: number | undefined;
  /** The library's decoding without its per-token scans, for byte-level tokenizers; undefined otherwise. */
  private readonly byteLevel: ByteLevelDecoder | undefined;

  private constructor(
    private readonly hf: HfTokenizer,
    private readonly tokenizerJson: TokenizerJson,
    private readonly tokenizerConfig: TokenizerConfigJson,
    modelConfig: ModelConfigJson | undefined,
  ) {
    const added = tokenizerJson.added_tokens ?? [];
    this.specialTokenIds = new Set(added.filter((t) => t.special === true).map((t) => t.id));
    const idOf = (value: TokenizerConfigJson['eos_token']): number | undefined => {
      const content = specialTokenContent(value);
      return content === undefined ? undefined : hf.token_to_id(content);
    };
    const eos = new Set<number>();
    const eosFromConfig = idOf(tokenizerConfig.eos_token);
    if (eosFromConfig !== undefined) eos.add(eosFromConfig);
    const modelEos = modelConfig?.eos_token_id;
    if (typeof modelEos === 'number') eos.add(modelEos);
    else if (Array.isArray(modelEos)) for (const id of modelEos as readonly number[]) eos.add(id);
    this.eosTokenIds = eos;
    this.bosTokenId = idOf(tokenizerConfig.bos_token) ?? (modelConfig?.bos_token_id ?? undefined);
    this.padTokenId = idOf(tokenizerConfig.pad_token) ?? (modelConfig?.pad_token_id ?? undefined);
    let maxId = -1;
    const vocab = tokenizerJson.model.vocab;
    const mapped = mappedVocab(hf, tokenizerJson);
    if (mapped !== undefined) {
      // Every vocabulary and added id is an index the library set in its id → token array: the highest
      // one set is the largest id.
      maxId = mapped.vocab.length - 1;
      while (maxId >= 0 && mapped.vocab[maxId] === undefined) maxId--;
    } else if (vocab !== undefined && !Array.isArray(vocab)) {
      for (const id of Object.values(vocab as Record<string, number>)) if (id > maxId) maxId = id;
    } else if (Array.isArray(vocab)) {
      maxId = vocab.length - 1; // Unigram: [token, score] pairs, id = index
    }
    for (const t of added) if (t.id > maxId) maxId = t.id;
    this.vocabSize = maxId + 1;
    this.maxTokenBytes = tokenByteBound(tokenizerJson, tokenizerConfig, mapped?.tokens_to_ids.keys());
    const parts = byteLevelParts(hf, mapped);
    this.byteLevel = parts === undefined ? undefined : new ByteLevelDecoder(parts);
    // the same pieces as the library's byte-level pre-tokenizer, without a TextEncoder call and an
    // array per word (about half of encode's time)
    installFastByteLevel(hf.pre_tokenizer);
  }

  /** From parsed JSON documents; throws `invalid_argument` when the library rejects them. */
  static fromJson(tokenizerJson: TokenizerJson, tokenizerConfig: TokenizerConfigJson = {}, modelConfig?: ModelConfigJson): Tokenizer {
    let hf: HfTokenizer;
    try {
      hf = new HfTokenizerClass(tokenizerJson, tokenizerConfig);
    } catch (e) {
      throw invalidArgument(`unsupported tokenizer.json: ${(e as Error).message}`, e);
    }
    return new Tokenizer(hf, tokenizerJson, tokenizerConfig, modelConfig);
  }

  /**
   * From a model folder's files (`readModelFolder`), shared: while a tokenizer built from the same
   * bytes (`tokenizerKey`) is held by anyone, that one is returned, not built again (instances are
   * immutable; a real vocabulary's takes ~0.3 s of CPU and ~100 MB to build).
   */
  static fromModelFolderFiles(files: ModelFolderFiles): Tokenizer {
    return sharedTokenizers.getOrSet(files.tokenizerKey, () => Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig, files.modelConfig));
  }

  /** From a Hugging Face model folder (see `readModelFolder`). */
  static async fromModelFolder(dir: string): Promise<Tokenizer> {
    return Tokenizer.fromModelFolderFiles(await readModelFolder(dir));
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    return this.hf.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
  }

  /**
   * `encode`, off the event loop when the text is long (from `OFF_LOOP_TOKENIZE_CHARS` UTF-16 units,
   * for callers that await many texts one by one): on a prompt preprocessing thread of the shared
   * `PreprocessPool`, same library, same files, same ids. Prompts go through the pool directly, with
   * its own lower threshold (`textPromptTokens`).
   */
  encodeOffLoop(text: string, options: EncodeOptions = {}): Promise<number[]> {
    if (text.length < OFF_LOOP_TOKENIZE_CHARS) return Promise.resolve(this.encode(text, options));
    return sharedPreprocessPool().encode(this, text, options.addSpecialTokens ?? false);
  }

  /** The documents this tokenizer was built from (a preprocessing thread builds its twin from them). */
  sourceFiles(): { readonly tokenizerJson: TokenizerJson; readonly tokenizerConfig: TokenizerConfigJson } {
    return { tokenizerJson: this.tokenizerJson, tokenizerConfig: this.tokenizerConfig };
  }

  /**
   * Text of `ids`. A byte-level token sequence that ends inside a UTF-8 character decodes to U+FFFD for
   * the incomplete bytes; streaming detokenisation must hold such tails back (it is not done here).
   */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return ''; // the library rejects an empty list
    const skip = options.skipSpecialTokens ?? false;
    return this.byteLevel?.decode(ids, skip) ?? this.hf.decode([...ids], { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
  }

  /** Id of a token string (vocabulary or added token); undefined when unknown. */
  tokenToId(token: string): number | undefined {
    return this.hf.token_to_id(token);
  }

  /** Token string of an id (byte-level form, e.g. `Ġthe`); undefined when out of range. */
  idToToken(id: number): string | undefined {
    return this.hf.id_to_token(id);
  }

  isSpecial(id: number): boolean {
    return this.specialTokenIds.has(id);
  }
}
