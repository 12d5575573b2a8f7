/**
 * Reading one model folder from disk: its config text, its version folders and a change stamp
 * for the config part and for each version (paths, sizes and mtimes of every file below), so
 * that poll mode and explicit re-loads can tell what changed. Also materialises load-time
 * file overrides into a temporary model folder.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { confinedSegments, internal, invalidArgument } from '@switchyard/common';
import { parseVersionDir } from '../repository.js';

export interface ModelSource {
  /** The model folder. */
  path: string;
  /** Contents of the model's configuration file, or undefined when absent. */
  configText: string | undefined;
  /** That file, relative to the model folder: `config.pbtxt`, or `configs/<name>.pbtxt` (`--model-config-name`). */
  configFile: string;
  /** Version numbers present on disk, ascending. */
  versions: number[];
  /** File names directly inside each version folder. */
  versionFiles: Map<number, string[]>;
  /** Change stamp of everything outside the version folders (config.pbtxt, labels, ...). */
  configStamp: string;
  /** Change stamp of each version folder. */
  versionStamps: Map<number, string>;
}

async function stampOf(path: string): Promise<string> {
  const parts: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const full = join(dir, e.name);
      const info = await stat(full).catch(() => undefined);
      if (info === undefined) continue;
      if (info.isDirectory()) {
        parts.push(`${relative(path, full)}/`);
        await walk(full);
      } else {
        parts.push(`${relative(path, full)}:${info.size}:${info.mtimeMs}`);
      }
    }
  };
  await walk(path);
  return parts.join('|');
}

/**
 * Read a model folder. `configName` (tritonserver's `--model-config-name`, already checked to be a
 * plain name): use `configs/<configName>.pbtxt` when the model has it, else `config.pbtxt`.
 */
export async function readModelSource(path: string, configName?: string): Promise<ModelSource> {
  const entries = await readdir(path, { withFileTypes: true });
  const versions: number[] = [];
  const versionFiles = new Map<number, string[]>();
  const versionStamps = new Map<number, string>();
  const configParts: string[] = [];
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = join(path, e.name);
    const info = await stat(full).catch(() => undefined);
    if (info === undefined) continue;
    const version = info.isDirectory() ? parseVersionDir(e.name) : undefined;
    if (version !== undefined) {
      versions.push(version);
      versionFiles.set(version, (await readdir(full).catch(() => [])).sort());
      versionStamps.set(version, await stampOf(full));
    } else if (info.isDirectory()) {
      configParts.push(`${e.name}/{${await stampOf(full)}}`);
    } else {
      configParts.push(`${e.name}:${info.size}:${info.mtimeMs}`);
    }
  }
  const custom = configName === undefined ? undefined : join('configs', `${configName}.pbtxt`);
  const customText = custom === undefined ? undefined : await readFile(join(path, custom), 'utf8').catch(() => undefined);
  const configFile = customText !== undefined ? custom! : 'config.pbtxt';
  const configText = customText ?? (await readFile(join(path, 'config.pbtxt'), 'utf8').catch(() => undefined));
  versions.sort((a, b) => a - b);
  return { path, configText, configFile, versions, versionFiles, configStamp: configParts.join('|'), versionStamps };
}

/** A temporary model folder built from load-time file overrides. */
export interface OverrideFolder {
  /**
   * `<temp>/model`: what the loader reads instead of the repository folder. Not named after the
   * model (a file override always carries its config, which names it), so any name the API
   * accepts works here, as in Triton, whose override folder is a temporary directory too.
   */
  path: string;
  /** Delete the temporary folder (after the versions loaded from it are unloaded). */
  dispose(): Promise<void>;
}

/**
 * Write `files` (keyed by path inside the model folder, e.g. `1/model.onnx`) into a fresh temp
 * folder. Every path must stay inside the folder (the confined resolver's lexical rules: no
 * absolute path, `..` segment or NUL byte), else Triton's message, before anything is written.
 * Messages never carry a local path or an errno name: the normalized path of a refused name is
 * shown relative to the model folder, and a write the file system refuses for the client's name
 * says why in words; any other failure is internal without the path (the cause keeps it, for logs).
 */
export async function materializeOverride(files: ReadonlyMap<string, Uint8Array>): Promise<OverrideFolder> {
  let base: string;
  try {
    base = await mkdtemp(join(tmpdir(), 'switchyard-override-'));
  } catch (e) {
    throw internal('failed to create a temporary folder for the model file override', e);
  }
  const root = join(base, 'model');
  const dispose = (): Promise<void> => rm(base, { recursive: true, force: true });
  try {
    await mkdir(root, { recursive: true }).catch((e: unknown) => {
      throw internal('failed to create a temporary folder for the model file override', e);
    });
    const targets: [string, string, Uint8Array][] = [];
    for (const [name, data] of files) {
      const refusal = `Invalid file parameter 'file:${name}' with normalized path '${relative(root, resolve(root, name))}' must stay within model directory.`;
      targets.push([name, join(root, ...confinedSegments(name, refusal)), data]);
    }
    for (const [name, target, data] of targets) {
      const dir = dirname(target);
      const existing = await stat(dir).catch(() => undefined);
      const asFile = `Invalid file parameter 'file:${relative(root, target)}', directory has been created as a file`;
      if (existing !== undefined && !existing.isDirectory()) throw invalidArgument(asFile);
      try {
        await mkdir(dir, { recursive: true });
        await writeFile(target, data);
      } catch (e) {
        // Names that clash with each other or that the file system refuses are the client's.
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOTDIR' || code === 'EEXIST') throw invalidArgument(asFile, e);
        if (code === 'EISDIR') throw invalidArgument(`Invalid file parameter 'file:${name}', a directory has been created with that name`, e);
        if (code === 'ENAMETOOLONG') throw invalidArgument(`Invalid file parameter 'file:${name}', the name is too long`, e);
        throw internal(`Invalid file parameter 'file:${name}', the file could not be written`, e);
      }
    }
    return { path: root, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}
