/**
 * Reading a Hugging Face model folder's text files: `tokenizer.json`, `tokenizer_config.json`,
 * `config.json`, `generation_config.json` (read by `generation-config.ts`; at most
 * MAX_GENERATION_CONFIG_BYTES, a regular file) and, when present, `chat_template.jinja` (newer
 * exports keep the template there instead of in tokenizer_config.json). The folder is the one an Optimum/Qwen/Llama ONNX export
 * produces, or the one onnx-builder's `llmFixtureRepositoryFiles()` generates for the tiny model.
 *
 * Only local files are read; nothing is downloaded. Each file goes through the confined resolver
 * (`resolveConfinedPath`): a symlink leading out of the folder is refused, never read. Each must be a
 * regular file (a FIFO would block the load forever) of at most its `MODEL_FOLDER_FILE_BYTES` bound,
 * read with one buffer of its size. Failures are classified here: a missing required file is
 * `not_found`, a file that is not the JSON object we need, or too big, is `invalid_argument`.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { invalidArgument, notFound, resolveConfinedPath } from '@switchyard/common';
import { MAX_GENERATION_CONFIG_BYTES } from '../generation-config.js';
import { WeakValueCache } from '../weak-value-cache.js';

/** The parts of tokenizer.json we read ourselves; the rest is passed to @huggingface/tokenizers as is. */
export interface TokenizerJson {
  readonly model: { readonly type?: string; readonly vocab?: Readonly<Record<string, number>> | readonly unknown[] };
  readonly added_tokens?: ReadonlyArray<{ readonly id: number; readonly content: string; readonly special?: boolean }>;
  readonly [key: string]: unknown;
}

/** A special token in tokenizer_config.json: a plain string or an AddedToken-like object. */
export type SpecialTokenValue = string | { readonly content: string } | null;

/** The parts of tokenizer_config.json we read; other keys are kept and passed through. */
export interface TokenizerConfigJson {
  readonly bos_token?: SpecialTokenValue;
  readonly eos_token?: SpecialTokenValue;
  readonly pad_token?: SpecialTokenValue;
  readonly unk_token?: SpecialTokenValue;
  /** One template, or named templates (`[{name, template}]` or `{name: template}`); 'default' is used. */
  readonly chat_template?: string | ReadonlyArray<{ readonly name: string; readonly template: string }> | Readonly<Record<string, string>>;
  readonly model_max_length?: number;
  readonly [key: string]: unknown;
}

/** The parts of config.json (the transformers model config) the engine needs. */
export interface ModelConfigJson {
  readonly model_type?: string;
  readonly vocab_size?: number;
  readonly hidden_size?: number;
  readonly num_hidden_layers?: number;
  readonly num_attention_heads?: number;
  /** Absent means no GQA: equal to num_attention_heads. */
  readonly num_key_value_heads?: number;
  /** Absent means hidden_size / num_attention_heads. */
  readonly head_dim?: number;
  readonly max_position_embeddings?: number;
  readonly bos_token_id?: number | null;
  /** Some models list several end-of-sequence ids. */
  readonly eos_token_id?: number | readonly number[] | null;
  readonly pad_token_id?: number | null;
  readonly [key: string]: unknown;
}

/** Everything textual a model folder holds. */
export interface ModelFolderFiles {
  readonly tokenizerJson: TokenizerJson;
  /** `{}` when the folder has no tokenizer_config.json. */
  readonly tokenizerConfig: TokenizerConfigJson;
  /** undefined when the folder has no config.json. */
  readonly modelConfig: ModelConfigJson | undefined;
  /** Contents of chat_template.jinja; undefined when absent (then tokenizerConfig.chat_template applies). */
  readonly chatTemplateFile: string | undefined;
  /** generation_config.json as a JSON object; undefined when absent (see `generationDefaults`). */
  readonly generationConfig: Readonly<Record<string, unknown>> | undefined;
  /**
   * SHA-256 (hex) naming the bytes of tokenizer.json, tokenizer_config.json and config.json: what a
   * `Tokenizer` is built from. Two folders with the same key get the same tokenizer
   * (`Tokenizer.fromModelFolderFiles` shares it).
   */
  readonly tokenizerKey: string;
}

/**
 * Parsed tokenizer.json documents by the SHA-256 of their bytes, while some model holds one: a folder
 * whose tokenizer.json another loaded model has already read gets that document, not a second parse
 * (a real vocabulary's file is megabytes: Qwen 3's 11 MB take ~0.13 s to parse and ~100 MB to hold).
 * Nothing mutates a parsed document, so sharing it is safe.
 */
const parsedTokenizerJson = new WeakValueCache<TokenizerJson>();

const sha256 = (bytes: Uint8Array | undefined): string => (bytes === undefined ? '-' : createHash('sha256').update(bytes).digest('hex'));

/**
 * The most bytes each file may have: several times the largest real exports (Gemma 3's tokenizer.json
 * is 33 MB, its tokenizer_config.json 1.2 MB; templates and configs are kilobytes).
 */
export const MODEL_FOLDER_FILE_BYTES = {
  'tokenizer.json': 256 * 1024 * 1024,
  'tokenizer_config.json': 64 * 1024 * 1024,
  'config.json': 16 * 1024 * 1024,
  'chat_template.jinja': 4 * 1024 * 1024,
  'generation_config.json': MAX_GENERATION_CONFIG_BYTES,
} as const;

/** Reads `dir`; only tokenizer.json is required. */
export async function readModelFolder(dir: string): Promise<ModelFolderFiles> {
  const tokenizerBytes = await readModelFolderBytes(dir, 'tokenizer.json', MODEL_FOLDER_FILE_BYTES['tokenizer.json']);
  if (tokenizerBytes === undefined) throw notFound(`model folder '${dir}' has no tokenizer.json`);
  const tokenizerDigest = sha256(tokenizerBytes);
  let tokenizerJson = parsedTokenizerJson.get(tokenizerDigest);
  if (tokenizerJson === undefined) {
    const parsed = parseObject(tokenizerBytes.toString('utf8'), 'tokenizer.json', dir);
    if (typeof parsed['model'] !== 'object' || parsed['model'] === null) {
      throw invalidArgument(`tokenizer.json in '${dir}' has no "model" object`);
    }
    tokenizerJson = parsedTokenizerJson.set(tokenizerDigest, parsed as TokenizerJson);
  }
  const configBytes = await readModelFolderBytes(dir, 'tokenizer_config.json', MODEL_FOLDER_FILE_BYTES['tokenizer_config.json']);
  const modelBytes = await readModelFolderBytes(dir, 'config.json', MODEL_FOLDER_FILE_BYTES['config.json']);
  const generationText = await readModelFolderText(dir, 'generation_config.json', MODEL_FOLDER_FILE_BYTES['generation_config.json']);
  return {
    generationConfig: generationText === undefined ? undefined : parseObject(generationText, 'generation_config.json', dir),
    tokenizerJson,
    tokenizerConfig: configBytes === undefined ? {} : (parseObject(configBytes.toString('utf8'), 'tokenizer_config.json', dir) as TokenizerConfigJson),
    modelConfig: modelBytes === undefined ? undefined : (parseObject(modelBytes.toString('utf8'), 'config.json', dir) as ModelConfigJson),
    chatTemplateFile: await readModelFolderText(dir, 'chat_template.jinja', MODEL_FOLDER_FILE_BYTES['chat_template.jinja']),
    tokenizerKey: createHash('sha256').update(`${tokenizerDigest} ${sha256(configBytes)} ${sha256(modelBytes)}`).digest('hex'),
  };
}

/** The string of a special token entry (`"<|im_end|>"` or `{content: "<|im_end|>"}`), or undefined. */
export function specialTokenContent(value: SpecialTokenValue | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  return typeof value === 'string' ? value : value.content;
}

/**
 * `dir/name` through the confined resolver: a link leading out of the folder is refused, not read.
 * Only a regular file of at most `maxBytes` is read (else invalid_argument); undefined when absent.
 * The one reader of a model folder's side files (the embedding backend's sentence-transformers files too).
 */
export async function readModelFolderText(
  dir: string,
  name: string,
  maxBytes: number,
  where: { readonly what: string; readonly within: string } = { what: `${name} of model folder '${dir}'`, within: 'that folder' },
): Promise<string | undefined> {
  return (await readModelFolderBytes(dir, name, maxBytes, where))?.toString('utf8');
}

/** `readModelFolderText`'s bytes, before decoding (`readModelFolder` names them by digest). */
async function readModelFolderBytes(
  dir: string,
  name: string,
  maxBytes: number,
  where: { readonly what: string; readonly within: string } = { what: `${name} of model folder '${dir}'`, within: 'that folder' },
): Promise<Buffer | undefined> {
  const found = resolveConfinedPath(dir, name, where.what, where.within);
  if (!found.exists) return undefined;
  try {
    // Non-blocking: opening a FIFO for reading would otherwise wait for a writer forever.
    const file = await open(found.path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const info = await file.stat();
      if (!info.isFile()) throw invalidArgument(`${name} in '${dir}' is not a regular file`);
      if (info.size > maxBytes) throw invalidArgument(`${name} in '${dir}' is ${info.size} bytes, more than the ${maxBytes} allowed`);
      // One byte more than the stat said: a file that grew since is seen to have grown.
      const buffer = Buffer.allocUnsafe(info.size + 1);
      let filled = 0;
      while (filled < buffer.length) {
        const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled > info.size) throw invalidArgument(`${name} in '${dir}' changed while it was read`);
      return buffer.subarray(0, filled);
    } finally {
      await file.close();
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

function parseObject(text: string, file: string, dir: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw invalidArgument(`${file} in '${dir}' is not valid JSON: ${(e as Error).message}`, e);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArgument(`${file} in '${dir}' is not a JSON object`);
  }
  return value as Record<string, unknown>;
}
