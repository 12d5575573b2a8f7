/**
 * Model repository semantics (Triton §5): model names, locating a model across several roots,
 * version selection by policy, and the server-side auto-complete of `platform` / `backend` /
 * `default_model_filename` from the files present. Pure functions, plus two small fs readers
 * (`listRepositoryModels`, `locateModel`) at the edge.
 */
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { internal, invalidArgument } from '@switchyard/common';
import type { ModelConfig, ModelVersionPolicy } from '@switchyard/model-config';
import { PLATFORM_BACKENDS } from './backend.js';

/**
 * Throws invalid_argument with Triton's messages for empty (or whitespace-only) names and names
 * that are not one folder of a repository: a path separator, NUL, or the segments `.` / `..`.
 * Any other name, `...` too, is an ordinary folder name (unknown unless a repository has it).
 */
export function validateModelName(name: string): void {
  if (/^[ \t\n\v\f\r]*$/.test(name)) throw invalidArgument('Model name cannot be empty. Please enter a valid name to deploy.');
  if (name.includes('/') || name.includes('\\') || name === '..' || name === '.' || name.includes('\0')) {
    throw invalidArgument(`invalid model name '${name}', model name must not contain path traversal characters`);
  }
}

export interface RepositoryListing {
  /** Model name → model folder, for names found in exactly one root. */
  models: Map<string, string>;
  /** Names found in more than one root: Triton makes them unavailable. */
  duplicates: Set<string>;
}

async function subdirectories(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const e of entries) {
    if (e.isDirectory()) out.push(e.name);
    else if (e.isSymbolicLink()) {
      const info = await stat(join(path, e.name)).catch(() => undefined);
      if (info?.isDirectory()) out.push(e.name);
    }
  }
  return out.sort();
}

/** Every model folder under every root. */
export async function listRepositoryModels(roots: readonly string[]): Promise<RepositoryListing> {
  const models = new Map<string, string>();
  const duplicates = new Set<string>();
  for (const root of roots) {
    for (const name of await subdirectories(root)) {
      if (name.startsWith('.')) continue;
      if (models.has(name) || duplicates.has(name)) {
        models.delete(name);
        duplicates.add(name);
      } else {
        models.set(name, join(root, name));
      }
    }
  }
  return { models, duplicates };
}

export const unknownModelLoadMessage = (name: string): string => `failed to load '${name}', failed to poll from model repository`;

/**
 * The folder of model `name`. Throws internal `failed to load '<m>', failed to poll from model
 * repository` when no root has it, and when more than one does (with the reason appended).
 */
export async function locateModel(roots: readonly string[], name: string): Promise<string> {
  validateModelName(name);
  const found: string[] = [];
  for (const root of roots) {
    const path = join(root, name);
    const info = await stat(path).catch(() => undefined);
    if (info?.isDirectory()) found.push(path);
  }
  if (found.length === 0) throw internal(unknownModelLoadMessage(name));
  if (found.length > 1) throw internal(`${unknownModelLoadMessage(name)}: '${name}' is not unique across all model repositories`);
  return found[0] as string;
}

/** A version folder name: digits, not starting with 0. */
export function parseVersionDir(name: string): number | undefined {
  if (!/^[1-9][0-9]*$/.test(name)) return undefined;
  const v = Number(name);
  return Number.isSafeInteger(v) ? v : undefined;
}

/** Versions to load under `policy` (default latest 1), ascending. */
export function selectVersions(policy: ModelVersionPolicy | undefined, available: readonly number[]): number[] {
  const sorted = [...new Set(available)].sort((a, b) => a - b);
  if (policy === undefined) return sorted.slice(-1);
  if ('all' in policy) return sorted;
  if ('specific' in policy) {
    const wanted = new Set(policy.specific.versions);
    return sorted.filter((v) => wanted.has(v));
  }
  const n = Math.max(1, policy.latest.num_versions);
  return sorted.slice(-n);
}

/** Default model file name per backend (Triton's defaults). */
export const DEFAULT_MODEL_FILENAMES: Readonly<Record<string, string>> = {
  onnxruntime: 'model.onnx',
  tensorrt: 'model.plan',
  pytorch: 'model.pt',
  python: 'model.py',
  openvino: 'model.xml',
  dali: 'model.dali',
};

const PLATFORM_FILENAMES: Readonly<Record<string, string>> = {
  onnxruntime_onnx: 'model.onnx',
  tensorrt_plan: 'model.plan',
  pytorch_libtorch: 'model.pt',
  torch_aoti: 'model.pt2',
  tensorflow_savedmodel: 'model.savedmodel',
  tensorflow_graphdef: 'model.graphdef',
};

/** What the presence of a default-named file tells: Triton's inference order. */
const FILE_HINTS: readonly { file: string; platform: string; backend: string }[] = [
  { file: 'model.plan', platform: 'tensorrt_plan', backend: 'tensorrt' },
  { file: 'model.onnx', platform: 'onnxruntime_onnx', backend: 'onnxruntime' },
  { file: 'model.savedmodel', platform: 'tensorflow_savedmodel', backend: 'tensorflow' },
  { file: 'model.graphdef', platform: 'tensorflow_graphdef', backend: 'tensorflow' },
  { file: 'model.pt', platform: 'pytorch_libtorch', backend: 'pytorch' },
  { file: 'model.pt2', platform: 'torch_aoti', backend: 'pytorch' },
  { file: 'model.py', platform: '', backend: 'python' },
  { file: 'model.xml', platform: '', backend: 'openvino' },
  { file: 'model.dali', platform: '', backend: 'dali' },
  // Ours: the JavaScript backend (its file name is left empty so it finds model.js or model.mjs).
  { file: 'model.js', platform: '', backend: 'javascript' },
  { file: 'model.mjs', platform: '', backend: 'javascript' },
];

/** Backend ↔ platform pairs Triton fills in when one side is given. */
const BACKEND_PLATFORMS: Readonly<Record<string, string>> = {
  onnxruntime: 'onnxruntime_onnx',
  tensorrt: 'tensorrt_plan',
};

/**
 * Server-side auto-complete (`AutoCompleteBackendFields`): name from the folder, platform and
 * backend from each other or from the files in the version folders (`versionFiles`: file
 * names per version, highest version first), and the default model file name.
 * `fromFiles` false (strict config) keeps the file-based guess off.
 */
export function completeBackendFields(
  config: ModelConfig,
  modelName: string,
  versionFiles: readonly (readonly string[])[],
  fromFiles: boolean,
): ModelConfig {
  const out: ModelConfig = { ...config };
  if (out.name === '') out.name = modelName;
  if (out.platform === 'ensemble') return out;
  if (out.backend === '' && out.platform !== '') out.backend = PLATFORM_BACKENDS[out.platform] ?? '';
  if (out.platform === '' && out.backend !== '') out.platform = BACKEND_PLATFORMS[out.backend] ?? '';
  if (fromFiles && out.backend === '' && out.platform === '') {
    const wanted = out.default_model_filename;
    outer: for (const files of versionFiles) {
      for (const hint of FILE_HINTS) {
        if (files.includes(hint.file) || (wanted !== '' && wanted === hint.file)) {
          out.platform = hint.platform;
          out.backend = hint.backend;
          break outer;
        }
      }
    }
  }
  if (out.default_model_filename === '') {
    out.default_model_filename = PLATFORM_FILENAMES[out.platform] ?? DEFAULT_MODEL_FILENAMES[out.backend] ?? '';
  }
  return out;
}

/** Triton requires the config's name to match the folder. */
export function checkConfigName(config: ModelConfig, folderName: string): void {
  if (config.name !== folderName) {
    throw invalidArgument(`unexpected directory name '${folderName}' for model '${config.name}', directory name must equal model name`);
  }
}
