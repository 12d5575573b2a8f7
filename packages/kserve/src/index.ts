export { DATATYPES } from './protocols.js';
export type { DataType, InferRequest, InferResponse, InferTensor, ParameterValue, Parameters, RequestedOutput } from './protocols.js';
export {
  bytesOf,
  deserializeBytesElements,
  elementByteSize,
  elementCount,
  fixedByteSize,
  isDataType,
  serializeBytesElements,
  typedView,
} from './tensor.js';
export type { TypedArray } from './tensor.js';
