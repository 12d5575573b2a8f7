/**
 * Typed gRPC tensor contents (`InferTensorContents`) → raw little-endian tensor bytes, following
 * Triton's InferGRPCToInput: the member used must match the input's datatype (int_contents also
 * carries INT8/INT16, uint_contents UINT8/UINT16, each element truncated to the narrow type),
 * only one member may be filled, FP16/BF16 have no typed member, and BYTES elements are
 * serialised with their 4-byte length prefixes.
 */
import { invalidArgument } from '@switchyard/common';
import type { GrpcInferTensorContents, GrpcInt64 } from './grpc-messages.js';
import type { DataType } from './protocols.js';
import { bytesOf, serializeBytesElements } from './tensor.js';

const bigints = (values: readonly GrpcInt64[]): bigint[] => values.map((v) => BigInt(v));

/**
 * Convert `contents` of input `name` (declared `datatype`) of a request for `model`.
 * An empty contents message yields zero bytes, as in Triton.
 */
export function contentsToBytes(name: string, model: string, datatype: DataType, c: GrpcInferTensorContents): Uint8Array {
  let data: Uint8Array | undefined;
  const take = (supplied: DataType, convert: () => Uint8Array): void => {
    if (data !== undefined) {
      throw invalidArgument(
        `unexpected explicit tensor data for input tensor '${name}' for model '${model}', binary data was already supplied.`,
      );
    }
    if (supplied !== datatype) {
      throw invalidArgument(
        `unexpected explicit tensor data for input tensor '${name}' for model '${model}' of type '${supplied}', expected datatype '${datatype}'`,
      );
    }
    data = convert();
  };

  const bools = c.bool_contents ?? [];
  if (bools.length > 0) take('BOOL', () => Uint8Array.from(bools, (b) => (b ? 1 : 0)));

  const ints = c.int_contents ?? [];
  if (ints.length > 0) {
    if (datatype === 'INT8') take('INT8', () => bytesOf(Int8Array.from(ints)));
    else if (datatype === 'INT16') take('INT16', () => bytesOf(Int16Array.from(ints)));
    else take('INT32', () => bytesOf(Int32Array.from(ints)));
  }

  const int64s = c.int64_contents ?? [];
  if (int64s.length > 0) take('INT64', () => bytesOf(BigInt64Array.from(bigints(int64s))));

  const uints = c.uint_contents ?? [];
  if (uints.length > 0) {
    if (datatype === 'UINT8') take('UINT8', () => Uint8Array.from(uints));
    else if (datatype === 'UINT16') take('UINT16', () => bytesOf(Uint16Array.from(uints)));
    else take('UINT32', () => bytesOf(Uint32Array.from(uints)));
  }

  const uint64s = c.uint64_contents ?? [];
  if (uint64s.length > 0) take('UINT64', () => bytesOf(BigUint64Array.from(bigints(uint64s))));

  const fp32s = c.fp32_contents ?? [];
  if (fp32s.length > 0) take('FP32', () => bytesOf(Float32Array.from(fp32s)));

  const fp64s = c.fp64_contents ?? [];
  if (fp64s.length > 0) take('FP64', () => bytesOf(Float64Array.from(fp64s)));

  const strings = c.bytes_contents ?? [];
  if (strings.length > 0) take('BYTES', () => serializeBytesElements(strings));

  return data ?? new Uint8Array(0);
}
