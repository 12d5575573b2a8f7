/**
 * Which request parameters a model sees. Triton's front doors turn five request parameters into
 * properties of the request (`TRITONSERVER_InferenceRequestSetCorrelationId`, `SetFlags`,
 * `SetPriority`, `SetTimeoutMicroseconds`) instead of parameters, and consume their own transport
 * options (HTTP `binary_data_output`, gRPC `triton_enable_empty_final_response`); a backend's
 * `request.parameters()` lists only the others. Our `InferRequest.parameters` keeps the five
 * (the engine's schedulers read them there), so what a model is shown goes through
 * `modelParameters`. The transport options never enter `InferRequest.parameters`: each decoder
 * keeps them apart. Per-tensor parameters (`binary_data_size`, `binary_data`, `classification`,
 * `shared_memory_*`) live on the tensors, never here.
 */
import { setOwn } from './http-json.js';
import type { Parameters } from './protocols.js';

/** Request parameters that are request properties in Triton (correlation id, sequence flags, priority, timeout). */
export const REQUEST_PROPERTY_PARAMETERS: ReadonlySet<string> = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout']);

/** The parameters a model sees of a request: `parameters` without the request properties, in their order. */
export function modelParameters(parameters: Parameters): Parameters {
  const out: Parameters = {};
  for (const [key, value] of Object.entries(parameters)) {
    if (!REQUEST_PROPERTY_PARAMETERS.has(key)) setOwn(out, key, value);
  }
  return out;
}
