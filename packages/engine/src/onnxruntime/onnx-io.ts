/**
 * A model's inputs and outputs as ONNX Runtime declares them (read from a session by `sessionIo`).
 * Types only: the config rules (`onnx-io-config.ts`) and the sequence checks they call
 * (`sequence-onnx-io.ts`) both read them.
 */

/** One model input or output as ORT declares it; dynamic/symbolic dims are -1. */
export interface OnnxIoInfo {
  name: string;
  /** ORT element type name ('float32', 'string', ...). */
  type: string;
  dims: number[];
}

export interface OnnxIo {
  inputs: OnnxIoInfo[];
  outputs: OnnxIoInfo[];
}
