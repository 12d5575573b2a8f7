/** What every HTTP handler may use. Built once by `createHttpServer`; handlers hold no other state. */
import type { Logger } from '@switchyard/common';
import type { AccessPolicy } from '../access-control.js';
import type { InferenceEngine } from '@switchyard/engine';
import type { ServerSettings } from '../settings.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import type { CodecThread } from '../codec-thread.js';
import type { OutputParsingConfig } from '@switchyard/llm';

export interface HttpContext {
  engine: InferenceEngine;
  shm: SharedMemoryManager;
  settings: ServerSettings;
  /** `--http-max-input-size` in bytes, applied to every body (and to decompressed bodies). */
  maxInputSize: number;
  logger: Logger;
  /** Restricted API groups and the OpenAI API key, checked before any route is served. */
  access: AccessPolicy;
  /** Decodes large inference requests off the event loop; owned (and closed) by the HTTP door. */
  codecThread: CodecThread;
  /**
   * `--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`: the OpenAI door's chat
   * output parsing of models whose config sets none of theirs (`resolveOutputParsing`).
   */
  outputParsing: OutputParsingConfig;
}
