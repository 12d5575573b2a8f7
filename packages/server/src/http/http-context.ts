/** What every HTTP handler may use. Built once by `createHttpServer`; handlers hold no other state. */
import type { Logger } from '@switchyard/common';
import type { AccessPolicy } from '../access-control.js';
import type { InferenceEngine } from '@switchyard/engine';
import type { ServerSettings } from '../settings.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import type { CodecThread } from '../codec-thread.js';
import type { TraceManager } from '../trace/trace-manager.js';
import type { HeaderForwardPattern } from '../header-forward.js';
import type { OutputParsingConfig } from '@switchyard/llm';

export interface HttpContext {
  engine: InferenceEngine;
  shm: SharedMemoryManager;
  settings: ServerSettings;
  /** Samples inference requests for tracing; undefined = no tracing (test doors, the router). */
  tracer: TraceManager | undefined;
  /**
   * `--http-max-input-size` in bytes: every body (and decompressed body), except the binary tensor
   * data of an infer request using the binary extension, bounded by `maxBinaryInputSize`.
   */
  maxInputSize: number;
  /** The most binary tensor data one infer request may carry after its JSON header. */
  maxBinaryInputSize: number;
  logger: Logger;
  /** Restricted API groups and the OpenAI API key, checked before any route is served. */
  access: AccessPolicy;
  /** Decodes large inference requests off the event loop; owned (and closed) by the HTTP door. */
  codecThread: CodecThread;
  /** `--http-header-forward-pattern`: headers that reach the model as request parameters; undefined = none. */
  headerForward: HeaderForwardPattern | undefined;
  /**
   * `--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`: the OpenAI door's chat
   * output parsing of models whose config sets none of theirs (`resolveOutputParsing`).
   */
  outputParsing: OutputParsingConfig;
}
