/**
 * Temporary model repositories for the end-to-end suites: a committed fixture folder
 * (`test/fixtures/<name>`, configs and scripts only) copied to a temporary directory, with
 * folders or files of the project laid over it and generated files (ONNX models built with
 * @switchyard/onnx-builder) written into it. The suite owns the copy and removes it when done.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { exampleRepositoryFiles } from '@switchyard/onnx-builder';
import { repoRoot } from '@switchyard/testing';

export interface FixtureRepositoryOptions {
  /** Project folders or files copied in after the fixture, keyed by their path in the repository: `{ repeat_int32: 'examples/model_repository/repeat_int32' }` (sources relative to the project root). */
  overlay?: Record<string, string>;
  /** Files written last, keyed by their path in the repository: `{ '<model>/1/model.onnx': bytes }`. */
  files?: Record<string, Uint8Array>;
}

export interface FixtureRepository {
  /** Absolute path of the temporary repository. */
  readonly path: string;
  /** Deletes the temporary repository; safe to call more than once. */
  remove(): void;
}

/** Copies `test/fixtures/<fixture>` to a new temporary folder, then applies `overlay` and `files` in that order. */
export function fixtureRepository(fixture: string, options: FixtureRepositoryOptions = {}): FixtureRepository {
  const root = repoRoot();
  const path = mkdtempSync(join(tmpdir(), `switchyard-${fixture}-`));
  cpSync(join(root, 'test/fixtures', fixture), path, { recursive: true });
  for (const [target, source] of Object.entries(options.overlay ?? {})) {
    mkdirSync(dirname(join(path, target)), { recursive: true });
    cpSync(join(root, source), join(path, target), { recursive: true });
  }
  for (const [target, bytes] of Object.entries(options.files ?? {})) {
    mkdirSync(dirname(join(path, target)), { recursive: true });
    writeFileSync(join(path, target), bytes);
  }
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** The bytes of a generated file of `examples/model_repository` (e.g. `'simple_sequence/1/model.onnx'`); throws if the example plan has none. */
export function exampleFile(path: string): Uint8Array {
  const file = exampleRepositoryFiles().find((f) => f.path === path);
  if (file === undefined) throw new Error(`no example file ${path}`);
  return file.build();
}
