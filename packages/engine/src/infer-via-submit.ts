/**
 * `InferenceEngine.infer` in terms of its `submit`, for every engine (the worker's Engine, a router's
 * ClusterEngine): the first response, settled on the final flag; the first error rejects; a final
 * flag without any response is `unavailable` ("produced no response", Triton's wording).
 */
import { unavailable } from '@switchyard/common';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import { requestPrefix } from './request-normalizer.js';
import type { InferenceEngine, SubmitOptions } from './types.js';

export function inferViaSubmit(engine: Pick<InferenceEngine, 'submit'>, request: InferRequest, options?: SubmitOptions): Promise<InferResponse> {
  return new Promise((resolve, reject) => {
    let response: InferResponse | undefined;
    engine.submit(
      request,
      (result) => {
        if (result.error !== undefined) return reject(result.error);
        if (result.response !== undefined && response === undefined) response = result.response;
        if (!result.final) return;
        if (response !== undefined) resolve(response);
        else reject(unavailable(`${requestPrefix(request.id)}model '${request.modelName}' produced no response`));
      },
      options,
    );
  });
}
