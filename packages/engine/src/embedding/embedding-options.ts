/**
 * What an `embedding` model computes, from its version folder (a sentence-transformers export) with
 * config.pbtxt parameters over it:
 *
 * - pooling: `modules.json`'s `sentence_transformers.models.Pooling` module folder (usually
 *   `1_Pooling`) → its `config.json` `pooling_mode_cls_token` / `pooling_mode_mean_tokens` /
 *   `pooling_mode_max_tokens` / `pooling_mode_lasttoken` (exactly one set; other modes are refused at
 *   load); parameter `pooling_mode` (`cls` | `mean` | `max` | `lasttoken`) overrides; default `mean`
 *   (sentence-transformers' own default). Ignored when the ONNX model already pools (its output is
 *   `sentence_embedding`).
 * - normalisation: a `sentence_transformers.models.Normalize` module in `modules.json`; parameter
 *   `normalize` (`true` | `false`) overrides; default: normalise when the folder has no `modules.json`
 *   (vLLM's default for embedding models), else as modules.json says.
 * - maximum sequence length: parameter `max_seq_length`, else `sentence_bert_config.json`
 *   `max_seq_length`, else `tokenizer_config.json` `model_max_length` (when it is a real length, not
 *   transformers' 1e30 placeholder), else config.json `max_position_embeddings`, else 512.
 * - Matryoshka: config.json `matryoshka_dimensions` (the allowed sizes) or `is_matryoshka: true`
 *   (any size), as vLLM reads them.
 *
 * Every file is resolved inside the version folder (`resolveConfinedPath`), read with a size bound.
 */
import { enforceLimits, invalidArgument } from '@switchyard/common';
import { readModelFolderText, type ModelFolderFiles } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';
import { POOLING_MODES, type PoolingMode } from './pooling.js';

export const DEFAULT_EMBEDDING_MAX_SEQ_LENGTH = 512;
/** Ceiling of `max_seq_length`: a padded batch holds max_batch_size × this many positions. */
export const MAX_EMBEDDING_SEQ_LENGTH = 131072;
/** The largest sentence-transformers JSON file read (they are a few hundred bytes). */
const MAX_SIDE_FILE_BYTES = 1 << 20;

export interface EmbeddingModelOptions {
  readonly pooling: PoolingMode;
  readonly normalize: boolean;
  readonly maxSeqLength: number;
  /** `undefined`: `dimensions` is refused; `'any'`: every size; else the sizes allowed. */
  readonly matryoshka: 'any' | readonly number[] | undefined;
}

type Json = Record<string, unknown>;

async function readJson(folder: string, name: string, what: string): Promise<Json | undefined> {
  const text = await readModelFolderText(folder, name, MAX_SIDE_FILE_BYTES, { what, within: 'its version folder' });
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw invalidArgument(`${what}: '${name}' is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidArgument(`${what}: '${name}' is not a JSON object or array`);
  return parsed as Json;
}

const param = (config: ModelConfig, key: string): string | undefined => config.parameters[key]?.string_value;

/** Pooling mode and normalisation from modules.json and the Pooling module's config.json. */
async function sentenceTransformersModules(folder: string, what: string): Promise<{ pooling?: PoolingMode; normalize?: boolean }> {
  const modules = await readJson(folder, 'modules.json', what);
  if (modules === undefined) return {};
  if (!Array.isArray(modules)) throw invalidArgument(`${what}: modules.json is not a list of modules`);
  let pooling: PoolingMode | undefined;
  let normalize = false;
  for (const m of modules as unknown[]) {
    const type = typeof m === 'object' && m !== null ? (m as Json)['type'] : undefined;
    const path = typeof m === 'object' && m !== null ? (m as Json)['path'] : undefined;
    if (type === 'sentence_transformers.models.Normalize') normalize = true;
    if (type === 'sentence_transformers.models.Pooling' && typeof path === 'string' && path !== '') {
      const pc = await readJson(folder, `${path}/config.json`, what);
      if (pc !== undefined) pooling = poolingFromFlags(pc, what);
    }
  }
  return { ...(pooling !== undefined ? { pooling } : {}), normalize };
}

function poolingFromFlags(pc: Json, what: string): PoolingMode {
  const flags: Array<[string, PoolingMode | null]> = [
    ['pooling_mode_cls_token', 'cls'],
    ['pooling_mode_mean_tokens', 'mean'],
    ['pooling_mode_max_tokens', 'max'],
    ['pooling_mode_lasttoken', 'lasttoken'],
    ['pooling_mode_mean_sqrt_len_tokens', null],
    ['pooling_mode_weightedmean_tokens', null],
  ];
  const set = flags.filter(([k]) => pc[k] === true);
  if (set.length !== 1) {
    throw invalidArgument(`${what}: the Pooling module must set exactly one of ${flags.map(([k]) => k).join(', ')}; it sets ${set.length === 0 ? 'none' : set.map(([k]) => k).join(', ')}`);
  }
  const [key, mode] = set[0]!;
  if (mode === null) throw invalidArgument(`${what}: ${key} is not supported (supported: cls, mean, max, lasttoken); set parameter 'pooling_mode' to override`);
  return mode;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}

/**
 * Read and check the options of the version in `folder`; throws invalid_argument naming the field.
 * `read`: the folder's tokenizer_config.json and config.json when the caller has read them already
 * (`readModelFolder`), so they are not read twice.
 */
export async function readEmbeddingOptions(
  config: ModelConfig,
  folder: string,
  read?: Pick<ModelFolderFiles, 'tokenizerConfig' | 'modelConfig'>,
): Promise<EmbeddingModelOptions> {
  const what = `unable to load model '${config.name}'`;
  const st = await sentenceTransformersModules(folder, what);
  const poolingParam = param(config, 'pooling_mode');
  if (poolingParam !== undefined && !POOLING_MODES.includes(poolingParam as PoolingMode)) {
    throw invalidArgument(`${what}: parameter 'pooling_mode' must be one of ${POOLING_MODES.join(', ')}, got '${poolingParam}'`);
  }
  const normalizeParam = param(config, 'normalize');
  if (normalizeParam !== undefined && normalizeParam !== 'true' && normalizeParam !== 'false') {
    throw invalidArgument(`${what}: parameter 'normalize' must be true or false, got '${normalizeParam}'`);
  }
  const sbert = await readJson(folder, 'sentence_bert_config.json', what);
  const tokConfig: Json | undefined = read !== undefined ? read.tokenizerConfig : await readJson(folder, 'tokenizer_config.json', what);
  const hf: Json | undefined = read !== undefined ? read.modelConfig : await readJson(folder, 'config.json', what);
  const lengthParam = param(config, 'max_seq_length');
  let maxSeqLength: number;
  if (lengthParam !== undefined) {
    const n = /^[0-9]{1,10}$/.test(lengthParam) ? Number(lengthParam) : NaN;
    if (!(n >= 1)) throw invalidArgument(`${what}: parameter 'max_seq_length' must be a positive integer, got '${lengthParam}'`);
    maxSeqLength = n;
  } else {
    const tokMax = positiveInt(tokConfig?.['model_max_length']);
    maxSeqLength =
      positiveInt(sbert?.['max_seq_length']) ??
      (tokMax !== undefined && tokMax <= MAX_EMBEDDING_SEQ_LENGTH ? tokMax : undefined) ??
      positiveInt(hf?.['max_position_embeddings']) ??
      DEFAULT_EMBEDDING_MAX_SEQ_LENGTH;
  }
  enforceLimits(what, [{ what: 'max_seq_length', value: maxSeqLength, max: MAX_EMBEDDING_SEQ_LENGTH, unit: 'tokens', why: 'a padded batch holds max_batch_size times this many positions' }]);
  let matryoshka: EmbeddingModelOptions['matryoshka'];
  const dims = hf?.['matryoshka_dimensions'];
  if (Array.isArray(dims) && dims.length > 0 && dims.every((d) => positiveInt(d) !== undefined)) matryoshka = dims as number[];
  else if (hf?.['is_matryoshka'] === true) matryoshka = 'any';
  return {
    pooling: (poolingParam as PoolingMode | undefined) ?? st.pooling ?? 'mean',
    normalize: normalizeParam !== undefined ? normalizeParam === 'true' : (st.normalize ?? true),
    maxSeqLength,
    matryoshka,
  };
}
