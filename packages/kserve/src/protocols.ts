/**
 * The in-process shape of KServe v2 / Triton inference requests and responses.
 *
 * Both front doors (HTTP JSON + binary extension, gRPC protobuf) decode into these and encode
 * from these; the engine only ever sees these. Validation happens at the decode edge
 * (`http-codec.ts`, `grpc-codec.ts`) and in the engine's request normalisation.
 */

/** KServe datatype strings, in Triton's config enum order (TYPE_BOOL = 1 ... TYPE_BF16 = 14). */
export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
  'BF16',
] as const;

export type DataType = (typeof DATATYPES)[number];

/**
 * A request or response parameter. int64/uint64 values that do not fit a double's integer
 * range arrive as `bigint`; everything else as `number`.
 */
export type ParameterValue = boolean | number | bigint | string;
export type Parameters = Record<string, ParameterValue>;

/**
 * A tensor as it travels through the server.
 *
 * `data` holds row-major, little-endian element bytes with no padding. BOOL is one byte per
 * element (0/1). BYTES elements are each a 4-byte little-endian uint32 length followed by the
 * raw bytes, concatenated: Triton's serialisation, identical to the binary extension and to
 * gRPC `raw_input_contents`. FP16 and BF16 are 2 raw bytes per element.
 *
 * For inputs whose bytes live in a shared-memory region, `parameters.shared_memory_region`
 * (and `_byte_size`, `_offset`) are set and `data` is empty until the front door resolves it.
 */
export interface InferTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
  parameters: Parameters;
}

/** An output the client asked for, with its per-output parameters (binary_data, classification, shared memory). */
export interface RequestedOutput {
  name: string;
  parameters: Parameters;
}

export interface InferRequest {
  /** Client-chosen id, echoed in responses; '' when absent. */
  id: string;
  modelName: string;
  /** A specific version, or undefined for "the highest READY version". */
  modelVersion: number | undefined;
  /**
   * Every request parameter, the request properties included (sequence_id, sequence_start, sequence_end, priority,
   * timeout); not the doors' transport options. A model sees `modelParameters(parameters)` (request-parameters.ts).
   */
  parameters: Parameters;
  inputs: InferTensor[];
  /** Requested outputs; empty means every output of the model. */
  outputs: RequestedOutput[];
}

export interface InferResponse {
  id: string;
  modelName: string;
  /** The version that actually ran, as a string (Triton always answers a string). */
  modelVersion: string;
  parameters: Parameters;
  outputs: InferTensor[];
}
