/**
 * `runSequenceBatch`: executes one sequence batch through the engine's execute path
 * (`SchedulerContext.run`, which records statistics and settles every job) by wrapping the
 * backend instance for that one execution:
 * - each request gets its slot's control tensors and implicit-state inputs appended, and asks
 *   for the state outputs as well as its own outputs;
 * - filler slots (direct strategy: a slot with nothing ready sits in the batch with READY false)
 *   are executed alongside, with zeroed inputs, and their results dropped;
 * - state outputs become the slot's new state and are removed before the client sees the result
 *   (also for responses sent through a `ResponseSender`, for decoupled sequence models).
 *
 * So the backend sees what Triton's backends see (controls and states as ordinary inputs and
 * outputs) and neither the backend nor the execute path knows about sequences.
 */
import type { InferTensor } from '@switchyard/kserve';
import type { BackendInstance, BackendResponse, ExecutionOutcome, ResponseSender } from '../backend.js';
import type { InferenceJob } from '../inference-job.js';
import type { NormalizedInput, NormalizedRequest } from '../normalized-request.js';
import type { BatchRunner } from '../scheduler.js';
import type { SequenceControls, RequestSequence } from './sequence-controls.js';
import type { SequenceState } from './sequence-state.js';
import { zeroTensorBytes } from './sequence-state.js';

/** One slot of a batch: a request of a sequence, or a filler that keeps later slots in place. */
export type SequenceBatchItem =
  | { kind: 'request'; job: InferenceJob; sequence: RequestSequence; state: SequenceState | undefined }
  | { kind: 'filler'; like: NormalizedRequest; state: SequenceState | undefined };

export interface SequenceBatchContext {
  run: BatchRunner;
  controls: SequenceControls;
  /** State output names every request must fetch (empty without implicit state). */
  stateOutputs: readonly string[];
}

/** A sender for filler slots: whatever a backend sends for them is dropped. */
const DISCARD: ResponseSender = {
  send: () => false,
  cancelled: false,
  onCancel: () => undefined,
};

/** Run `items` (in slot order) as one execution on `instance`. Never rejects. */
export function runSequenceBatch(context: SequenceBatchContext, instance: BackendInstance, items: readonly SequenceBatchItem[]): Promise<void> {
  const jobs: InferenceJob[] = [];
  for (const item of items) if (item.kind === 'request') jobs.push(item.job);
  const wrapper: BackendInstance = {
    name: instance.name,
    release: () => instance.release(),
    execute: (requests, senders) => executeWrapped(context, instance, items, requests, senders),
  };
  return context.run(wrapper, jobs);
}

async function executeWrapped(
  context: SequenceBatchContext,
  instance: BackendInstance,
  items: readonly SequenceBatchItem[],
  requests: readonly NormalizedRequest[],
  senders: readonly ResponseSender[] | undefined,
): Promise<ExecutionOutcome> {
  const requestItems = items.filter((it): it is Extract<SequenceBatchItem, { kind: 'request' }> => it.kind === 'request');
  const full: NormalizedRequest[] = [];
  const fullSenders: ResponseSender[] = [];
  /** For each position of `full`: the index into `requests`, or -1 for a filler. */
  const origin: number[] = [];
  let next = 0;
  for (const item of items) {
    if (item.kind === 'filler') {
      full.push(fillerRequest(context, item.like, item.state));
      fullSenders.push(DISCARD);
      origin.push(-1);
      continue;
    }
    const i = next++;
    const request = requests[i] as NormalizedRequest;
    full.push(augment(context, request, item));
    const sender = senders?.[i];
    fullSenders.push(sender === undefined ? DISCARD : stateAwareSender(sender, item.state, request.requestedOutputs));
    origin.push(i);
  }
  const outcome = await instance.execute(full, senders === undefined ? undefined : fullSenders);
  const results: ExecutionOutcome['results'] = new Array(requests.length);
  const viaSender: boolean[] | undefined = outcome.viaSender === undefined ? undefined : new Array<boolean>(requests.length).fill(false);
  origin.forEach((i, position) => {
    if (i < 0) return;
    const item = requestItems[i] as Extract<SequenceBatchItem, { kind: 'request' }>;
    if (viaSender !== undefined) viaSender[i] = outcome.viaSender?.[position] === true;
    const result = outcome.results[position];
    if (result !== undefined) results[i] = takeState(result, item.state, (requests[i] as NormalizedRequest).requestedOutputs);
  });
  return viaSender === undefined ? { results, timing: outcome.timing } : { results, viaSender, timing: outcome.timing };
}

/** The request with its controls and state inputs appended, fetching the state outputs too. */
function augment(context: SequenceBatchContext, request: NormalizedRequest, item: Extract<SequenceBatchItem, { kind: 'request' }>): NormalizedRequest {
  const inputs: NormalizedInput[] = [...request.inputs, ...context.controls.tensors(item.sequence, item.sequence.id)];
  if (item.state !== undefined) inputs.push(...item.state.inputs());
  return { ...request, inputs, requestedOutputs: withStateOutputs(request.requestedOutputs, context.stateOutputs) };
}

/** A READY=false copy of `like`: same input shapes, zeroed data, zeroed state. */
function fillerRequest(context: SequenceBatchContext, like: NormalizedRequest, state: SequenceState | undefined): NormalizedRequest {
  const inputs: NormalizedInput[] = like.inputs.map((input) => ({
    name: input.name,
    datatype: input.datatype,
    shape: [...input.shape],
    originalShape: [...input.originalShape],
    data: zeroTensorBytes(input.datatype, input.shape),
  }));
  inputs.push(...context.controls.tensors({ start: false, end: false }, undefined, true));
  if (state !== undefined) inputs.push(...state.nullInputs());
  return {
    request: { ...like.request, id: '', parameters: {} },
    batchSize: like.batchSize,
    inputs,
    requestedOutputs: withStateOutputs(like.requestedOutputs, context.stateOutputs),
  };
}

function withStateOutputs(requested: readonly string[], stateOutputs: readonly string[]): string[] {
  const out = [...requested];
  for (const name of stateOutputs) if (!out.includes(name)) out.push(name);
  return out;
}

/** Store the state outputs of a response and keep only the outputs the client asked for. */
function takeState(response: BackendResponse, state: SequenceState | undefined, requested: readonly string[]): BackendResponse {
  if ('error' in response) return response;
  if (state !== undefined) state.update(response.outputs);
  const outputs: InferTensor[] = response.outputs.filter((o) => requested.includes(o.name));
  return response.parameters === undefined ? { outputs } : { outputs, parameters: response.parameters };
}

function stateAwareSender(sender: ResponseSender, state: SequenceState | undefined, requested: readonly string[]): ResponseSender {
  return {
    send: (response, final, sentAtNs) => sender.send(response === undefined ? undefined : takeState(response, state, requested), final, sentAtNs),
    get cancelled() {
      return sender.cancelled;
    },
    onCancel: (listener) => sender.onCancel(listener),
  };
}
