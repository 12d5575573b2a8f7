/**
 * `EnsembleRun`: one ensemble request on its way through the steps (Triton's EnsembleContext).
 *
 * The run keeps the ensemble tensors of this request. A step is sent, as an ordinary request,
 * through the engine (`EnsemblePort.submit`: normalisation, the composing model's own scheduler,
 * its statistics) as soon as every tensor it reads exists; its outputs become new tensors, which
 * may make more steps ready. Only the steps needed for the requested outputs run.
 *
 * Decoupled steps answer zero or more times. Every tensor therefore holds numbered values
 * ("iterations"): each response of a step adds the next iteration of each of its outputs, and a
 * step runs once per iteration its inputs share. A response of the ensemble is ready when every
 * requested output has a value of one iteration. A decoupled ensemble streams each ready
 * response; any other sends its single response when nothing is left in flight.
 *
 * The run ends when no step is in flight. The first step error fails the request (steps in flight
 * are awaited, none are started), as `in ensemble '<name>', <message>` with the step's error code,
 * counted as failure reason OTHER. Cancellation of the ensemble request aborts the steps in
 * flight and starts no more. Single-threaded: every step result is handled in a microtask of its
 * own, after the composing model's job recorded its statistics.
 */
import { SwitchyardError, invalidArgument, toSwitchyardError, type Logger } from '@switchyard/common';
import type { DataType, InferRequest, InferResponse, InferTensor } from '@switchyard/kserve';
import type { ExecutionTiming, ResponseSender } from '../backend.js';
import { neededSteps, reshapeDims, type EnsemblePlan, type EnsembleStepPlan } from './ensemble-plan.js';
import type { EnsemblePort } from './ensemble-port.js';
import type { InferenceJob } from '../inference-job.js';
import { requestPrefix } from '../request-normalizer.js';
import type { ModelStatsCollector } from '../statistics.js';
import type { InferResult } from '../types.js';

const now = (): bigint => process.hrtime.bigint();

interface TensorValue {
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
}

/** One iteration of a tensor. `value` undefined: an optional input not given, or an output a step did not return. */
interface Entry {
  value: TensorValue | undefined;
  /** Readers still to come (needed steps, plus the response when requested); dropped at 0. */
  refs: number;
}

interface TensorSlot {
  next: number;
  /** Batch size of the request that produced the tensor (0: not batched). */
  batchSize: number;
  entries: Map<number, Entry>;
}

/** A tensor and the iteration that just became available. */
type Update = readonly [tensor: string, iteration: number];

export interface EnsembleRunOptions {
  plan: EnsemblePlan;
  job: InferenceJob;
  port: EnsemblePort;
  stats: ModelStatsCollector;
  decoupled: boolean;
  logger: Logger;
  /** Called once when the run ended (its result is delivered). */
  onEnd: () => void;
}

export class EnsembleRun {
  private readonly plan: EnsemblePlan;
  private readonly job: InferenceJob;
  private readonly sender: ResponseSender;
  private readonly slots = new Map<string, TensorSlot>();
  private readonly needed: Set<number>;
  private readonly requested: readonly string[];
  private readonly requestedSet: ReadonlySet<string>;
  private readonly inflightSteps = new Set<AbortController>();
  private inflight = 0;
  private error: SwitchyardError | undefined;
  private cancelled = false;
  private ended = false;
  /** A non-decoupled ensemble's response, held until nothing is in flight. */
  private held: InferTensor[] | undefined;
  private readonly computeStartNs: bigint;
  private computeInputNs = 0n;
  private computeInferNs = 0n;
  private computeOutputNs = 0n;

  constructor(private readonly options: EnsembleRunOptions) {
    this.plan = options.plan;
    this.job = options.job;
    this.requested = this.job.request.requestedOutputs;
    this.requestedSet = new Set(this.requested);
    this.needed = neededSteps(this.plan, this.requested);
    this.job.markExecuting();
    this.computeStartNs = now();
    this.sender = this.job.responseSender();
    this.sender.onCancel(() => this.cancel());
  }

  /** Put the request's inputs in place and start every step they make ready. */
  start(): void {
    const request = this.job.request;
    const updates: Update[] = [];
    for (const input of request.inputs) {
      updates.push(this.add(input.name, { datatype: input.datatype, shape: input.shape, data: input.data }, request.batchSize));
    }
    for (const name of this.plan.optionalInputs) {
      if (!request.inputs.some((i) => i.name === name)) updates.push(this.add(name, undefined, request.batchSize));
    }
    this.proceed(updates);
  }

  private slot(tensor: string): TensorSlot {
    let slot = this.slots.get(tensor);
    if (slot === undefined) {
      slot = { next: 0, batchSize: 0, entries: new Map() };
      this.slots.set(tensor, slot);
    }
    return slot;
  }

  private add(tensor: string, value: TensorValue | undefined, batchSize?: number): Update {
    const slot = this.slot(tensor);
    if (batchSize !== undefined) slot.batchSize = batchSize;
    const readers = (this.plan.consumers.get(tensor) ?? []).filter((i) => this.needed.has(i)).length;
    const iteration = slot.next++;
    slot.entries.set(iteration, { value, refs: readers + (this.requestedSet.has(tensor) ? 1 : 0) });
    return [tensor, iteration];
  }

  /** One reader is done with these tensors' iteration. */
  private release(tensors: Iterable<string>, iteration: number): void {
    for (const tensor of tensors) {
      const entries = this.slot(tensor).entries;
      const entry = entries.get(iteration);
      if (entry !== undefined && --entry.refs <= 0) entries.delete(iteration);
    }
  }

  /** New tensor values are in: respond if a response is complete, start the steps they make ready. */
  private proceed(updates: readonly Update[]): void {
    if (this.sender.cancelled) this.cancel();
    const live = this.error === undefined && !this.cancelled;
    const ready = live ? this.readySteps(updates) : [];
    this.inflight += ready.length;
    if (live) this.collectResponses(updates);
    for (const [index, iteration] of ready) this.launch(this.plan.steps[index] as EnsembleStepPlan, iteration);
    this.maybeEnd();
  }

  private readySteps(updates: readonly Update[]): (readonly [number, number])[] {
    const ready = new Map<string, readonly [number, number]>();
    for (const [tensor, iteration] of updates) {
      for (const index of this.plan.consumers.get(tensor) ?? []) {
        if (!this.needed.has(index)) continue;
        const step = this.plan.steps[index] as EnsembleStepPlan;
        if (step.inputs.every(([, t]) => this.slot(t).entries.has(iteration))) ready.set(`${index}:${iteration}`, [index, iteration]);
      }
    }
    return [...ready.values()];
  }

  private collectResponses(updates: readonly Update[]): void {
    const done = new Set<number>();
    for (const [tensor, iteration] of updates) {
      if (!this.requestedSet.has(tensor) || done.has(iteration)) continue;
      if (!this.requested.every((name) => this.slot(name).entries.has(iteration))) continue;
      done.add(iteration);
      this.respond(iteration);
    }
  }

  private respond(iteration: number): void {
    const outputs: InferTensor[] = [];
    const batched = this.job.request.batchSize !== 0;
    for (const name of this.requested) {
      const slot = this.slot(name);
      const value = slot.entries.get(iteration)?.value;
      if (value === undefined) continue; // the composing model did not produce it
      const shape = reshapeDims(this.plan.outputDims.get(name) ?? [], batched, slot.batchSize, value.shape);
      outputs.push({ name, datatype: value.datatype, shape, data: value.data, parameters: {} });
    }
    this.release(this.requested, iteration);
    if (this.options.decoupled) this.sender.send({ outputs }, false);
    else this.held ??= outputs;
  }

  /** Send one step to its composing model. The caller counted it in `inflight`. */
  private launch(step: EnsembleStepPlan, iteration: number): void {
    if (this.error !== undefined || this.cancelled) {
      this.inflight--;
      return;
    }
    const request = this.job.request.request;
    const found = this.options.port.composingVersion(step.modelName, step.modelVersion);
    const config = found instanceof Error ? found : found.config;
    const consumed = new Set(step.inputs.map(([, tensor]) => tensor));
    if (config instanceof Error) {
      this.release(consumed, iteration);
      this.inflight--;
      this.error = config;
      return;
    }
    const inputs: InferTensor[] = [];
    let batchSize = 0;
    for (const [name, tensor] of step.inputs) {
      const slot = this.slot(tensor);
      const value = slot.entries.get(iteration)?.value;
      if (value === undefined) continue; // an optional input left out
      const inputConfig = config.input.find((i) => i.name === name);
      const shape = inputConfig === undefined ? value.shape : reshapeDims(inputConfig.dims, config.max_batch_size > 0, slot.batchSize, value.shape);
      if (batchSize === 0 && config.max_batch_size > 0 && inputConfig?.is_shape_tensor !== true) batchSize = shape[0] ?? 0;
      inputs.push({ name, datatype: value.datatype, shape, data: value.data, parameters: {} });
    }
    this.release(consumed, iteration);
    for (const [, tensor] of step.outputs) this.slot(tensor).batchSize = batchSize;
    const stepRequest: InferRequest = {
      id: request.id,
      modelName: step.modelName,
      modelVersion: step.modelVersion,
      // Sequence ids and flags, priority, timeout and every other parameter go to each step.
      parameters: { ...request.parameters },
      inputs,
      outputs: step.outputs.map(([name]) => ({ name, parameters: {} })),
    };
    const controller = new AbortController();
    this.inflightSteps.add(controller);
    this.options.port.submit(
      stepRequest,
      (result) => queueMicrotask(() => this.onStepResult(step, result, controller)),
      { signal: controller.signal, ...(this.job.trace !== undefined ? { trace: this.job.trace.child() } : {}) },
      (t) => {
        this.computeInputNs += t.inputNs;
        this.computeInferNs += t.inferNs;
        this.computeOutputNs += t.outputNs;
      },
    );
  }

  private onStepResult(step: EnsembleStepPlan, result: InferResult, controller: AbortController): void {
    try {
      if (result.final) {
        this.inflight--;
        this.inflightSteps.delete(controller);
      }
      let updates: Update[] = [];
      if (result.error !== undefined) this.error ??= result.error;
      else if (result.response !== undefined && this.error === undefined && !this.cancelled) updates = this.consume(step, result.response);
      this.proceed(updates);
    } catch (e) {
      // A bug here must not leave the request hanging or take the process down.
      this.options.logger.error({ err: e, model: this.plan.name }, 'ensemble step result handling failed');
      this.error ??= toSwitchyardError(e);
      this.maybeEnd();
    }
  }

  /** A step's response: each mapped output becomes the next iteration of its ensemble tensor. */
  private consume(step: EnsembleStepPlan, response: InferResponse): Update[] {
    return step.outputs.map(([name, tensor]) => {
      const out = response.outputs.find((o) => o.name === name);
      return this.add(tensor, out === undefined ? undefined : { datatype: out.datatype, shape: out.shape, data: out.data });
    });
  }

  private cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    for (const controller of this.inflightSteps) controller.abort();
  }

  private timing(): ExecutionTiming {
    const start = this.computeStartNs;
    const inputEnd = start + this.computeInputNs;
    const outputStart = inputEnd + this.computeInferNs;
    return { computeStartNs: start, computeInputEndNs: inputEnd, computeOutputStartNs: outputStart, computeEndNs: outputStart + this.computeOutputNs };
  }

  private maybeEnd(): void {
    if (this.ended || this.inflight > 0) return;
    this.ended = true;
    try {
      this.deliver();
    } finally {
      this.options.onEnd();
    }
  }

  private deliver(): void {
    const { job, stats } = this.options;
    if (this.cancelled || this.sender.cancelled) return job.failCancelled();
    const name = this.plan.name;
    if (this.error !== undefined) {
      const e = this.error;
      return job.fail(new SwitchyardError(e.code, `in ensemble '${name}', ${e.message}`, { cause: e }), 'OTHER');
    }
    const timing = this.timing();
    const record = (): void => stats.recordExecution(job.batchElements, this.computeInputNs, this.computeInferNs, this.computeOutputNs);
    if (this.options.decoupled) {
      record();
      job.executionEnded(timing, true);
      this.sender.send(undefined, true);
    } else if (this.held !== undefined) {
      record();
      job.succeed(this.held, timing);
    } else {
      const prefix = requestPrefix(job.request.request.id);
      job.fail(invalidArgument(`in ensemble '${name}', ${prefix}unexpected deadlock, at least one output is not set while no more ensemble steps can be made`), 'OTHER');
    }
  }
}
