/**
 * Implicit state (`sequence_batching.state`), Triton's rules:
 * - each state entry names a model input (`input_name`) and a model output (`output_name`); the
 *   server feeds the state to the input and stores what the model produced at the output as the
 *   state for the next request of the same sequence, so clients never see either tensor;
 * - a sequence's state starts (on every START) from its `initial_state` (zeros, or the bytes of
 *   `<model folder>/initial_state/<data_file>`) or, without one, from zeros shaped like `dims`
 *   with each variable dimension 1; with batching the state has a leading batch dimension of 1.
 *
 * `ImplicitStateConfig` is built and validated once per loaded version (with Triton's messages);
 * `SequenceState` is the live state of one batch slot, owned by that slot's batcher.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { invalidArgument, resolveConfinedPath } from '@switchyard/common';
import { elementByteSize, elementCount, type DataType, type InferTensor } from '@switchyard/kserve';
import { configDataTypeToWire, type ModelConfig, type ModelSequenceBatching, type ModelSequenceState } from '@switchyard/model-config';
import type { NormalizedInput } from '../normalized-request.js';

/** Folder of a model that holds `initial_state` data files (Triton's kInitialStateFolder). */
export const INITIAL_STATE_FOLDER = 'initial_state';

/** One state tensor value: datatype, full shape (batch dimension included when batching), bytes. */
export interface StateValue {
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
}

interface StateEntry {
  inputName: string;
  outputName: string;
  initial: StateValue;
}

/** Zero-filled tensor bytes; BYTES elements are empty strings (a zero length prefix each). */
export function zeroTensorBytes(datatype: DataType, shape: readonly number[]): Uint8Array {
  const count = elementCount(shape);
  return new Uint8Array(datatype === 'BYTES' ? 4 * count : count * elementByteSize(datatype));
}

export class ImplicitStateConfig {
  private readonly entries: StateEntry[] = [];

  /**
   * Validates the state entries as Triton does when the scheduler is created, and reads
   * initial-state data files from `modelPath`. Throws invalid_argument with Triton's messages.
   */
  constructor(config: ModelConfig, modelPath: string | undefined) {
    const sb = config.sequence_batching as ModelSequenceBatching | undefined;
    const batchDims = config.max_batch_size > 0 ? [1] : [];
    const withInitial = new Set<string>();
    for (const state of sb?.state ?? []) {
      const datatype = configDataTypeToWire(state.data_type);
      if (state.initial_state.length > 1) {
        throw invalidArgument(
          `initial_state field for state input '${state.input_name}' must contain exactly one or zero element. Found '${state.initial_state.length}' elements.`,
        );
      }
      let initial: StateValue;
      if (state.initial_state.length === 1) {
        if (withInitial.has(state.input_name)) throw invalidArgument(`State input name '${state.input_name}' specified more than once.`);
        withInitial.add(state.input_name);
        initial = initialStateValue(state, batchDims, modelPath);
      } else {
        const shape = [...batchDims, ...state.dims.map((d) => (d === -1 ? 1 : d))];
        initial = { datatype, shape, data: zeroTensorBytes(datatype, shape) };
      }
      // Triton ignores (with a warning) a second state with an input or output name already used.
      if (this.entries.some((e) => e.inputName === state.input_name || e.outputName === state.output_name)) continue;
      this.entries.push({ inputName: state.input_name, outputName: state.output_name, initial });
    }
  }

  get isEmpty(): boolean {
    return this.entries.length === 0;
  }

  /** Output names the backend must produce for every request of a batch (state outputs). */
  outputNames(): string[] {
    return this.entries.map((e) => e.outputName);
  }

  /** A fresh state for a sequence that is starting. */
  initialState(): SequenceState {
    return new SequenceState(this.entries);
  }
}

function initialStateValue(state: ModelSequenceState, batchDims: number[], modelPath: string | undefined): StateValue {
  const init = state.initial_state[0]!;
  const name = state.input_name;
  if (init.data_type !== state.data_type) {
    throw invalidArgument(`The data type used for 'initial_state' field of state '${name}' does not match the state data type.`);
  }
  if (init.name === '') throw invalidArgument(`Field 'name' must be set when using initial_state for state input '${name}'.`);
  if (init.dims.length !== state.dims.length) {
    throw invalidArgument(
      `Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '${name}'. ${init.dims.length} != ${state.dims.length}`,
    );
  }
  init.dims.forEach((d, i) => {
    const expected = state.dims[i] as number;
    if (d === -1) throw invalidArgument(`'initial_state' field for state input name '${name}' contains variable dimensions.`);
    if (expected !== -1 && d !== expected) {
      throw invalidArgument(`'initial_state' dim for input name '${name}' doesn't match 'state' dim description. ${d} != ${expected}`);
    }
  });
  const datatype = configDataTypeToWire(state.data_type);
  const shape = [...batchDims, ...init.dims];
  if (init.data_file === undefined || init.data_file === '') {
    if (init.zero_data !== true) throw invalidArgument(`initial_state setting expects state'${name}' to have state_data set`);
    return { datatype, shape, data: zeroTensorBytes(datatype, shape) };
  }
  if (modelPath === undefined) throw invalidArgument(`initial_state data file '${init.data_file}' cannot be read: the model folder is unknown`);
  const found = resolveConfinedPath(
    join(modelPath, INITIAL_STATE_FOLDER),
    init.data_file,
    `initial_state data_file '${init.data_file}' of state '${name}'`,
    "the model's initial_state folder",
  );
  let file: Uint8Array;
  try {
    file = readFileSync(found.path);
  } catch (e) {
    throw invalidArgument(`failed to open text file for read ${found.path}: ${(e as Error).message}`, e);
  }
  if (datatype === 'BYTES') return { datatype, shape, data: Uint8Array.from(file) };
  const size = elementCount(init.dims) * elementByteSize(datatype);
  if (size > file.byteLength) {
    throw invalidArgument(`initial_state setting expects ${size} bytes, but the data provided from ${init.data_file}only has ${file.byteLength} bytes.`);
  }
  return { datatype, shape, data: Uint8Array.from(file.subarray(0, size)) };
}

/**
 * The implicit state of the sequence occupying one batch slot. Not shared: the slot's batcher
 * reads it when it places a request and updates it when that request's execution returns,
 * and a slot never has two requests executing at once.
 */
export class SequenceState {
  private readonly values = new Map<string, StateValue>();
  private readonly outputToInput = new Map<string, string>();

  constructor(entries: readonly StateEntry[]) {
    for (const e of entries) {
      this.values.set(e.inputName, e.initial);
      this.outputToInput.set(e.outputName, e.inputName);
    }
  }

  /** The state tensors to feed with the sequence's next request. */
  inputs(): NormalizedInput[] {
    return [...this.values].map(([name, v]) => ({ name, datatype: v.datatype, shape: [...v.shape], originalShape: [...v.shape], data: v.data }));
  }

  /** Zero-filled tensors shaped like this state, for filler slots that must not see real state. */
  nullInputs(): NormalizedInput[] {
    return [...this.values].map(([name, v]) => ({ name, datatype: v.datatype, shape: [...v.shape], originalShape: [...v.shape], data: zeroTensorBytes(v.datatype, v.shape) }));
  }

  /** Take the state outputs of an execution as the new state; other outputs are ignored. */
  update(outputs: readonly InferTensor[]): void {
    for (const out of outputs) {
      const input = this.outputToInput.get(out.name);
      if (input === undefined) continue;
      const previous = this.values.get(input)!;
      this.values.set(input, { datatype: previous.datatype, shape: [...out.shape], data: out.data });
    }
  }
}
