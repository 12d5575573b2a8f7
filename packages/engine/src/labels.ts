/**
 * Classification labels (Triton's `LabelProvider`): an output whose config names a
 * `label_filename` gets that file's lines as its class labels. The file is relative to the model
 * folder, read once when a version loads (a missing file fails the load, as in Triton), one label
 * per line as `std::getline` splits them (a final newline adds no empty label; `\r` is kept).
 * The front doors append `:<label>` to a classification result when the class index has a
 * non-empty label.
 *
 * The model loader reads them with the final config (`loadVersion`), whatever the backend, and the
 * `LoadedVersion` carries them. An ensemble output without a label file takes the labels of the
 * composing output mapped onto it (`ensemble/ensemble-labels.ts`).
 *
 * Deviation: a `label_filename` that resolves outside the model folder (a `..`, an absolute path, a
 * link leading out) is refused at load by the confined resolver (Triton reads it). A load request's config override comes from clients, and classification
 * output would otherwise echo lines of arbitrary files back to them.
 */
import { readFile } from 'node:fs/promises';
import { internal, resolveConfinedPath } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import type { OutputLabels } from './types.js';

/** The labels of a model without label files. */
export const NO_LABELS: OutputLabels = new Map();

/** A label file's lines, split as `std::getline` does. */
export function parseLabelFile(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

const ERRNO_TEXT: Readonly<Record<string, string>> = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  EISDIR: 'Is a directory',
  ENOTDIR: 'Not a directory',
};

/**
 * Read the label file of every output that names one. Throws invalid_argument for a path
 * outside the model folder and internal with Triton's wording
 * (`failed to open text file for read <path>: <reason>`) for a file that cannot be read.
 */
export async function loadOutputLabels(config: ModelConfig, modelPath: string): Promise<OutputLabels> {
  const labels = new Map<string, readonly string[]>();
  for (const output of config.output) {
    const file = output.label_filename;
    if (!file) continue;
    const { path } = resolveConfinedPath(modelPath, file, `label_filename '${file}' of output '${output.name}' for model '${config.name}'`);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? '';
      throw internal(`failed to open text file for read ${path}: ${ERRNO_TEXT[code] ?? (e as Error).message}`, e);
    }
    labels.set(output.name, parseLabelFile(text));
  }
  return labels;
}
