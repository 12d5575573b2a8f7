/**
 * The one resolver for every path-like value a model brings (a config's `default_model_filename`,
 * `cc_model_filenames`, `label_filename`, warmup and initial-state data files, load-time `file:`
 * overrides, the tokenizer files of an LLM folder): a path relative to a folder the model owns,
 * which must stay inside that folder.
 *
 * Contract:
 * - The name must be a non-empty relative path with no NUL byte and no `..` segment (`/` and `\`
 *   both separate segments), checked before the file system is touched, so a name can never be used
 *   to probe what exists outside.
 * - Symbolic links are followed only while they stay inside the folder (its real path): a link that
 *   leads outside, or that cannot be resolved, is refused with the same message as a `..` name,
 *   whether or not its target exists.
 * - The result is the real path to open (symlinks resolved), or, when nothing exists there, the
 *   lexical path inside the folder (for a "not found" message that reveals nothing outside).
 *
 * Refusals are `invalid_argument`; the caller names the field and the model in `what`.
 */
import { lstatSync, realpathSync } from 'node:fs';
import { isAbsolute, join, sep } from 'node:path';
import { invalidArgument } from './errors.js';

export interface ConfinedPath {
  /** Real path inside the folder when `exists`, else the lexical path (folder + name). */
  readonly path: string;
  /** Whether something (a file or a folder) exists there. */
  readonly exists: boolean;
}

/** The segments of `name` after the lexical checks; throws invalid_argument with `refusal`. */
export function confinedSegments(name: string, refusal: string): string[] {
  if (typeof name !== 'string' || name === '' || name.includes('\0') || isAbsolute(name) || name.startsWith('\\')) {
    throw invalidArgument(refusal);
  }
  const segments = name.split(/[\\/]+/).filter((s) => s !== '' && s !== '.');
  if (segments.length === 0 || segments.includes('..')) throw invalidArgument(refusal);
  return segments;
}

const isInside = (root: string, path: string): boolean => path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);

const errnoOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code;

/**
 * Resolve `name` inside `folder`. `what` describes the value for the refusal message, e.g.
 * `default_model_filename 'x.js' of model 'm'`; the message says it must name a path inside the
 * folder (`where`, e.g. `the version folder`). A `folder` that does not exist gives `exists: false`.
 */
export function resolveConfinedPath(folder: string, name: string, what: string, where = 'the model folder'): ConfinedPath {
  const refusal = `${what} must name a path inside ${where}`;
  const segments = confinedSegments(name, refusal);
  const lexical = join(folder, ...segments);
  let root: string;
  try {
    root = realpathSync(folder);
  } catch (e) {
    if (errnoOf(e) === 'ENOENT' || errnoOf(e) === 'ENOTDIR') return { path: lexical, exists: false };
    throw e;
  }
  let current = root;
  for (const segment of segments) {
    const next = join(current, segment);
    let info;
    try {
      info = lstatSync(next);
    } catch (e) {
      if (errnoOf(e) === 'ENOENT' || errnoOf(e) === 'ENOTDIR') return { path: lexical, exists: false };
      throw e;
    }
    if (info.isSymbolicLink()) {
      let real: string;
      try {
        real = realpathSync(next);
      } catch {
        // Dangling or looping: refused like an escape, so the answer says nothing about the target.
        throw invalidArgument(refusal);
      }
      if (!isInside(root, real)) throw invalidArgument(refusal);
      current = real;
    } else {
      current = next;
    }
  }
  return { path: current, exists: true };
}
