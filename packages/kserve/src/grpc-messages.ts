/**
 * Plain-object shapes of the `inference.*` inference messages (`proto/grpc_service.proto`) as
 * `@grpc/proto-loader` hands them over and accepts them back, loaded with
 * `{ keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }`.
 *
 * - Field names are the proto's snake_case names.
 * - 64-bit integers decode as decimal strings (`longs: String`) so uint64 sequence ids and
 *   int64 tensor contents keep every bit; on encode a number or a decimal string is accepted.
 * - `bytes` decode as Node `Buffer`s that are usually unaligned slices of the frame; on encode any
 *   `Uint8Array` is accepted.
 * - A oneof carries a virtual `parameter_choice` naming the member that is set (`oneofs: true`).
 *   Decoders also accept hand-built objects without it (tests, in-process callers).
 *
 * Decoder-side fields are optional so that hand-built messages need not spell out defaults.
 */

/** A 64-bit integer on the wire: a decimal string when decoded, a number or string when encoded. */
export type GrpcInt64 = string | number;

export type GrpcParameterChoice = 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';

/** `InferParameter`: oneof parameter_choice { bool=1, int64=2, string=3, double=4, uint64=5 }. */
export interface GrpcInferParameter {
  parameter_choice?: GrpcParameterChoice;
  bool_param?: boolean;
  int64_param?: GrpcInt64;
  string_param?: string;
  double_param?: number;
  uint64_param?: GrpcInt64;
}

/** `InferTensorContents`: one repeated field per element family, row-major. */
export interface GrpcInferTensorContents {
  bool_contents?: boolean[];
  /** INT8, INT16 and INT32. */
  int_contents?: number[];
  int64_contents?: GrpcInt64[];
  /** UINT8, UINT16 and UINT32. */
  uint_contents?: number[];
  uint64_contents?: GrpcInt64[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

/** `ModelInferRequest.InferInputTensor`. `contents` is null/absent when the field was not sent. */
export interface GrpcInferInputTensor {
  name: string;
  datatype: string;
  shape?: GrpcInt64[];
  parameters?: Record<string, GrpcInferParameter>;
  contents?: GrpcInferTensorContents | null;
}

/** `ModelInferRequest.InferRequestedOutputTensor`. */
export interface GrpcInferRequestedOutputTensor {
  name: string;
  parameters?: Record<string, GrpcInferParameter>;
}

/** `ModelInferRequest`. */
export interface GrpcModelInferRequest {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, GrpcInferParameter>;
  inputs?: GrpcInferInputTensor[];
  outputs?: GrpcInferRequestedOutputTensor[];
  /** One entry per input that has neither `contents` nor shared memory, in input order. */
  raw_input_contents?: Uint8Array[];
}

/** `ModelInferResponse.InferOutputTensor` as the server sends it (never with `contents`). */
export interface GrpcInferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters: Record<string, GrpcInferParameter>;
}

/** `ModelInferResponse`: `raw_output_contents[i]` holds the bytes of `outputs[i]`. */
export interface GrpcModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, GrpcInferParameter>;
  outputs: GrpcInferOutputTensor[];
  raw_output_contents: Uint8Array[];
}

/** `ModelStreamInferResponse`: either an error message or a response (which may echo the request id). */
export interface GrpcModelStreamInferResponse {
  error_message: string;
  infer_response: GrpcModelInferResponse | null;
}
