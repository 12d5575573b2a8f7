/**
 * Triton's JSON trace file (`--trace-config triton,file=...`): one JSON array of entries per file,
 * `{"id","model_name","model_version"[,"request_id"][,"parent_id"]}`, `{"id","timestamps":[{"name","ns"}]}`
 * and `{"id","activity","tensor":{"name","data","shape","dtype"}}`, a trace's entries together,
 * grouped by trace id. Indexed files `<file>.<n>` take `log_frequency` traces each, or the traces of
 * a limited `trace_count`, as tritonserver writes them.
 *
 * Unlike tritonserver, which keeps every trace in memory until it writes a file (at shutdown, for
 * `log_frequency` 0), each trace is written when it ends, and the file is kept a complete JSON array
 * after every write (the closing `]` is overwritten by the next trace): memory stays bounded and a
 * reader sees valid JSON once the first trace is written (the file is created empty just before).
 * Writes are synchronous and small (one trace).
 */
import { accessSync, closeSync, constants, openSync, statSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { invalidArgument } from '@switchyard/common';
import type { RequestTrace, TraceItem } from './request-trace.js';

/** A trace's entries as JSON texts, in Triton's order: by trace id, then as recorded. Pure. */
export function tritonTraceEntries(trace: RequestTrace): string[] {
  const out: string[] = [];
  for (const node of [...trace.nodes].sort((a, b) => a.id - b.id)) {
    for (const item of node.items) out.push(entry(node.id, node.parentId, item));
  }
  return out;
}

function entry(id: number, parentId: number, item: TraceItem): string {
  switch (item.kind) {
    case 'model': {
      let text = `{"id":${id},"model_name":${JSON.stringify(item.modelName)},"model_version":${item.modelVersion}`;
      if (item.requestId !== '') text += `,"request_id":${JSON.stringify(item.requestId)}`;
      if (parentId !== 0) text += `,"parent_id":${parentId}`;
      return text + '}';
    }
    case 'timestamp':
      return `{"id":${id},"timestamps":[{"name":${JSON.stringify(item.name)},"ns":${item.ns}}]}`;
    case 'tensor':
      return `{"id":${id},"activity":${JSON.stringify(item.activity)},"tensor":${JSON.stringify(item.tensor)}}`;
  }
}

/**
 * Refuse, at start-up, a trace file the worker could not write: its folder missing or not
 * writable, or the path naming a folder or a read-only file. invalid_argument with the reason.
 */
export function checkTraceFilePath(path: string): void {
  const full = resolve(path);
  const dir = dirname(full);
  const fail = (why: string): never => {
    throw invalidArgument(`cannot write trace file '${path}': ${why}`);
  };
  let dirStat;
  try {
    dirStat = statSync(dir);
  } catch {
    return fail(`folder '${dir}' does not exist`);
  }
  if (!dirStat.isDirectory()) fail(`'${dir}' is not a folder`);
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    fail(`folder '${dir}' is not writable`);
  }
  let fileStat;
  try {
    fileStat = statSync(full);
  } catch {
    return; // created at the first trace
  }
  if (!fileStat.isFile()) fail('it exists and is not a regular file');
  try {
    accessSync(full, constants.W_OK);
  } catch {
    fail('it exists and is not writable');
  }
}

/** One JSON array file kept complete after every append. */
class JsonArrayFile {
  #fd: number | undefined;
  /** Byte position of the closing ']'. */
  #end = 0;

  constructor(readonly path: string) {}

  append(entries: readonly string[]): void {
    if (entries.length === 0) return;
    const body = entries.join(',');
    if (this.#fd === undefined) {
      this.#fd = openSync(this.path, 'w');
      const bytes = Buffer.from(`[${body}]`);
      writeSync(this.#fd, bytes, 0, bytes.length, 0);
      this.#end = bytes.length - 1;
      return;
    }
    const bytes = Buffer.from(`,${body}]`);
    writeSync(this.#fd, bytes, 0, bytes.length, this.#end);
    this.#end += bytes.length - 1;
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }
}

export class TritonTraceFile {
  readonly #main: JsonArrayFile;
  /** After `close()` nothing is written: a late trace must not reopen (and truncate) a finished file. */
  #closed = false;
  /**
   * Open indexed files by the setting filling them (a model with its own setting, or the global
   * one): as tritonserver, where each setting collects its own traces, each batch is a file of its own.
   */
  readonly #indexed = new Map<string, { file: JsonArrayFile; traces: number }>();
  #nextIndex = 0;

  constructor(readonly path: string) {
    this.#main = new JsonArrayFile(path);
  }

  /** Append to `<file>`. Throws the file system's error. */
  appendMain(entries: readonly string[]): void {
    if (this.#closed) return;
    this.#main.append(entries);
  }

  /**
   * Append to the indexed file `<file>.<n>` that `owner`'s setting is filling (opening the next
   * index if it has none open); returns the traces in it.
   */
  appendIndexed(entries: readonly string[], owner = ''): number {
    if (this.#closed) return 0;
    let open = this.#indexed.get(owner);
    if (open === undefined) {
      open = { file: new JsonArrayFile(`${this.path}.${this.#nextIndex++}`), traces: 0 };
      this.#indexed.set(owner, open);
    }
    open.file.append(entries);
    return ++open.traces;
  }

  /** Finish `owner`'s open indexed file (every one when undefined); its next trace starts a new index. */
  closeIndexed(owner?: string): void {
    for (const [key, open] of this.#indexed) {
      if (owner !== undefined && key !== owner) continue;
      open.file.close();
      this.#indexed.delete(key);
    }
  }

  close(): void {
    this.closeIndexed();
    this.#main.close();
    this.#closed = true;
  }
}
