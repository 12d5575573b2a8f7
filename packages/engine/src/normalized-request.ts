/**
 * What normalisation (`normalizeRequest`, `request-normalizer.ts`) hands the schedulers and
 * backends: a request they can trust. Types only, so that modules the normaliser itself calls
 * (the sequence controls) can build inputs without importing it back.
 */
import type { DataType, InferRequest } from '@switchyard/kserve';

export interface NormalizedInput {
  name: string;
  datatype: DataType;
  /** Shape as the backend sees it: batch dimension first (when batching), after `reshape`. */
  shape: number[];
  /** Shape as the client sent it. */
  originalShape: number[];
  data: Uint8Array;
}

export interface NormalizedRequest {
  request: InferRequest;
  /** The request's batch size: its first dimension when the model batches, else 0. */
  batchSize: number;
  /** Inputs in the order the client sent them. */
  inputs: NormalizedInput[];
  /** Outputs to return, in the order they should appear in the response. */
  requestedOutputs: string[];
}
