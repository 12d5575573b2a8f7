/**
 * Writing the JSON header and body chunks of an HTTP inference response (Triton's
 * `FinalizeResponse`). Separate from the decoder so each file stays one concern; the public
 * entry point is `encodeHttpInferResponse` in `http-codec.ts`.
 */
import { stringifyJson } from './http-json.js';
import { tensorDataToJson } from './json-data.js';
import type { InferResponse, InferTensor } from './protocols.js';

const encoder = new TextEncoder();

export interface ResponseOutput {
  tensor: InferTensor;
  kind: 'json' | 'binary' | 'shm';
}

export function buildHttpInferResponse(
  response: InferResponse,
  outputs: readonly ResponseOutput[],
): { headerLength: number; chunks: Uint8Array[]; binary: boolean } {
  const blobs: Uint8Array[] = [];
  const parts: string[] = [];
  if (response.id !== '') parts.push(`"id":${JSON.stringify(response.id)}`);
  parts.push(`"model_name":${JSON.stringify(response.modelName)}`);
  parts.push(`"model_version":${JSON.stringify(String(response.modelVersion))}`);
  if (Object.keys(response.parameters).length > 0) parts.push(`"parameters":${stringifyJson(response.parameters)}`);
  const outs: string[] = [];
  for (const { tensor, kind } of outputs) {
    let s = `{"name":${JSON.stringify(tensor.name)},"datatype":${JSON.stringify(tensor.datatype)},"shape":[${tensor.shape.join(',')}]`;
    if (kind === 'binary') {
      s += `,"parameters":{"binary_data_size":${tensor.data.byteLength}}`;
      if (tensor.data.byteLength > 0) blobs.push(tensor.data);
    } else if (kind === 'json') {
      s += `,"data":${stringifyJson(tensorDataToJson(tensor.name, tensor.datatype, tensor.shape, tensor.data))}`;
    }
    outs.push(`${s}}`);
  }
  parts.push(`"outputs":[${outs.join(',')}]`);
  const header = encoder.encode(`{${parts.join(',')}}`);
  // Triton switches to application/octet-stream only when binary bytes actually follow.
  return { headerLength: header.byteLength, chunks: [header, ...blobs], binary: blobs.length > 0 };
}
