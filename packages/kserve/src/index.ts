export { DATATYPES } from './protocols.js';
export type { DataType, InferRequest, InferResponse, InferTensor, ParameterValue, Parameters, RequestedOutput } from './protocols.js';
export {
  MAX_TENSOR_BYTE_SIZE,
  bytesOf,
  checkInputByteSize,
  checkInputShape,
  dataTypeOf,
  deserializeBytesElements,
  dimsToString,
  elementByteSize,
  elementCount,
  fixedByteSize,
  isDataType,
  requestPrefix,
  serializeBytesElements,
  typedView,
} from './tensor.js';
export type { InputShapeContext, TypedArray } from './tensor.js';
export { bytesElementCount, bytesElementsEnd, deserializeStringElements, firstUnfitStringElement, serializeStringElements, utf8ByteLength } from './bytes-strings.js';
export {
  classificationCounts,
  decodeModelInferRequest,
  emptyFinalStreamResponse,
  encodeModelInferResponse,
  streamInferError,
  streamInferResponse,
} from './grpc-codec.js';
export type { DecodedGrpcInferRequest, EncodeResponseOptions, StreamEcho } from './grpc-codec.js';
export { encodeModelInferResponseBytes, encodeModelStreamInferResponseBytes } from './grpc-wire.js';
export { decodeModelInferRequestBytes } from './grpc-wire-request.js';
export {
  ENABLE_EMPTY_FINAL_RESPONSE,
  FINAL_RESPONSE_PARAMETER,
  encodeParameter,
  parameterChoice,
  parameterValue,
  parseModelVersion,
} from './grpc-parameters.js';
export type {
  GrpcInferInputTensor,
  GrpcInferOutputTensor,
  GrpcInferParameter,
  GrpcInferRequestedOutputTensor,
  GrpcInferTensorContents,
  GrpcInt64,
  GrpcModelInferRequest,
  GrpcModelInferResponse,
  GrpcModelStreamInferResponse,
  GrpcParameterChoice,
} from './grpc-messages.js';
export { parseJson, stringifyJson, formatDouble, hasDoubleLiteral, isDoubleLiteralMember, isJsonObject, JsonDoubles, JsonIntegers } from './http-json.js';
export type { JsonObject, JsonValue } from './http-json.js';
export { MAX_JSON_DATA_DEPTH, jsonToTensorData, tensorDataToJson } from './json-data.js';
export {
  decodeHttpInferRequest,
  decodeHttpRawInferRequest,
  encodeHttpInferResponse,
  parseInferenceHeaderLength,
} from './http-codec.js';
export type {
  DecodedHttpInferRequest,
  EncodedHttpInferResponse,
  HttpInferBody,
  HttpOutputKind,
  HttpRequestedOutput,
  HttpResponseOptions,
  RawInputModel,
} from './http-codec.js';
export { classifyTensor, MAX_CLASSIFICATION_ELEMENTS } from './http-classification.js';
export { modelParameters, REQUEST_PROPERTY_PARAMETERS } from './request-parameters.js';
export { decodeHttpGenerateRequest, encodeHttpGenerateResponse } from './http-generate.js';
export type { GenerateInputMetadata } from './http-generate.js';
