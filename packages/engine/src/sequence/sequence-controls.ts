/**
 * The request side of Triton's sequence batcher, pure:
 * - `sequenceOf(request)`: the correlation id and START/END flags a request carries;
 * - `checkSequenceParameters(config, request)`: the checks Triton makes while building a request
 *   (a string id longer than 128 characters is unsupported, for every model) and, for models with
 *   a CORRID control, that the id's kind matches the control's data type;
 * - `SequenceControls`: the control tensors (START / END / READY / CORRID) the server adds to each
 *   request of a sequence batch, built once per loaded version from `sequence_batching.control_input`.
 *
 * Control tensors hold one element per request (shape `[1, 1]` when the model batches, `[1]`
 * otherwise), so they concatenate along the batch dimension like any other input.
 */
import { invalidArgument, unsupported } from '@switchyard/common';
import { requestPrefix, type DataType, type InferRequest, type Parameters } from '@switchyard/kserve';
import {
  configDataTypeToWire,
  type ModelConfig,
  type ModelSequenceBatching,
  type ModelSequenceControl,
  type SequenceControlKind,
  wireDataTypeToConfig,
} from '@switchyard/model-config';
import type { NormalizedInput } from '../normalized-request.js';

/** Triton's limit on string correlation ids (TRITONSERVER_InferenceRequestSetCorrelationIdString). */
export const MAX_STRING_CORRELATION_ID_LENGTH = 128;

/**
 * A correlation (sequence) id: an unsigned 64-bit integer or a string. Ids of different kinds
 * never match (5 and "5" are two sequences). `0n` and `''` mean "no sequence".
 */
export type CorrelationId = { readonly type: 'uint64'; readonly value: bigint } | { readonly type: 'string'; readonly value: string };

export interface SequenceFlags {
  start: boolean;
  end: boolean;
}

export interface RequestSequence extends SequenceFlags {
  id: CorrelationId;
  /** Map key for `id` (kind-qualified, so 5 and "5" differ). */
  key: string;
}

/** The correlation id in a request's parameters. gRPC int64 ids are read as uint64, as Triton does. */
export function correlationIdOf(parameters: Parameters): CorrelationId {
  const v = parameters['sequence_id'];
  if (typeof v === 'string') return { type: 'string', value: v };
  if (typeof v === 'bigint') return { type: 'uint64', value: BigInt.asUintN(64, v) };
  if (typeof v === 'number' && Number.isFinite(v)) return { type: 'uint64', value: BigInt.asUintN(64, BigInt(Math.trunc(v))) };
  return { type: 'uint64', value: 0n };
}

export function inSequence(id: CorrelationId): boolean {
  return id.type === 'string' ? id.value !== '' : id.value !== 0n;
}

/** The id as Triton prints it in messages: the decimal number or the string itself. */
export function correlationText(id: CorrelationId): string {
  return id.type === 'string' ? id.value : id.value.toString();
}

export function sequenceOf(request: InferRequest): RequestSequence {
  const id = correlationIdOf(request.parameters);
  return {
    id,
    key: `${id.type === 'string' ? 's' : 'u'}:${id.value}`,
    start: request.parameters['sequence_start'] === true,
    end: request.parameters['sequence_end'] === true,
  };
}

/**
 * Checks made before normalisation. Every model: a string id longer than 128 characters is
 * unsupported (Triton refuses it while building the request). Models with a CORRID control: the
 * id's kind must match the control's data type (a string id needs TYPE_STRING, an integer id
 * one of the integer types).
 */
export function checkSequenceParameters(config: ModelConfig, request: InferRequest): void {
  const raw = request.parameters['sequence_id'];
  if (typeof raw === 'string' && Buffer.byteLength(raw, 'utf8') > MAX_STRING_CORRELATION_ID_LENGTH) {
    throw unsupported(`string correlation ID cannot be longer than ${MAX_STRING_CORRELATION_ID_LENGTH} characters`);
  }
  if (raw === undefined || config.sequence_batching === undefined) return;
  const corrid = findControl(config.sequence_batching as ModelSequenceBatching, 'CONTROL_SEQUENCE_CORRID');
  if (corrid === undefined) return;
  const id = correlationIdOf(request.parameters);
  const expected = configDataTypeToWire(corrid.control.data_type);
  const given: DataType = id.type === 'string' ? 'BYTES' : 'UINT64';
  const matches = id.type === 'string' ? expected === 'BYTES' : expected !== 'BYTES';
  if (!matches) {
    throw invalidArgument(
      `${requestPrefix(request.id)}sequence batching control '${corrid.name}' data-type is '${given}', but model '${config.name}' expects '${expected}'`,
    );
  }
}

function findControl(sb: ModelSequenceBatching, kind: SequenceControlKind): { name: string; control: ModelSequenceControl } | undefined {
  for (const input of sb.control_input ?? []) {
    const control = input.control.find((c) => c.kind === kind);
    if (control !== undefined) return { name: input.name, control };
  }
  return undefined;
}

/** A boolean control: the tensor name, its datatype and the bytes of one false / true element. */
interface BooleanControl {
  name: string;
  datatype: DataType;
  falseBytes: Uint8Array;
  trueBytes: Uint8Array;
}

function booleanControl(sb: ModelSequenceBatching, kind: SequenceControlKind): BooleanControl | undefined {
  const found = findControl(sb, kind);
  if (found === undefined) return undefined;
  const { name, control } = found;
  if (control.int32_false_true.length === 2) {
    const [f, t] = control.int32_false_true as [number, number];
    return { name, datatype: 'INT32', falseBytes: bytes(Int32Array.of(f)), trueBytes: bytes(Int32Array.of(t)) };
  }
  if (control.fp32_false_true.length === 2) {
    const [f, t] = control.fp32_false_true as [number, number];
    return { name, datatype: 'FP32', falseBytes: bytes(Float32Array.of(f)), trueBytes: bytes(Float32Array.of(t)) };
  }
  const [f, t] = control.bool_false_true as [boolean, boolean];
  return { name, datatype: 'BOOL', falseBytes: Uint8Array.of(f ? 1 : 0), trueBytes: Uint8Array.of(t ? 1 : 0) };
}

function bytes(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** The datatype a control tensor has in the model (config wording, e.g. `TYPE_INT32`), for the load-time I/O check. */
export interface ControlTensorSpec {
  name: string;
  configType: string;
}

/**
 * The control tensors of one model. Built once per loaded version; `tensors()` is called for
 * every request placed in a batch slot (and for every filler slot, with `notReady`).
 */
export class SequenceControls {
  private readonly start: BooleanControl | undefined;
  private readonly end: BooleanControl | undefined;
  private readonly ready: BooleanControl | undefined;
  private readonly corrid: { name: string; datatype: DataType } | undefined;
  private readonly shape: number[];

  constructor(config: ModelConfig) {
    const sb = (config.sequence_batching ?? { control_input: [] }) as ModelSequenceBatching;
    this.start = booleanControl(sb, 'CONTROL_SEQUENCE_START');
    this.end = booleanControl(sb, 'CONTROL_SEQUENCE_END');
    this.ready = booleanControl(sb, 'CONTROL_SEQUENCE_READY');
    const corrid = findControl(sb, 'CONTROL_SEQUENCE_CORRID');
    this.corrid = corrid === undefined ? undefined : { name: corrid.name, datatype: configDataTypeToWire(corrid.control.data_type) };
    this.shape = config.max_batch_size > 0 ? [1, 1] : [1];
  }

  /** Every control tensor the model declares, with its config datatype. */
  specs(): ControlTensorSpec[] {
    const out: ControlTensorSpec[] = [];
    for (const c of [this.start, this.end, this.ready, this.corrid]) {
      if (c !== undefined) out.push({ name: c.name, configType: wireDataTypeToConfig(c.datatype) });
    }
    return out;
  }

  get isEmpty(): boolean {
    return this.start === undefined && this.end === undefined && this.ready === undefined && this.corrid === undefined;
  }

  /**
   * The control inputs for one batch slot. A ready slot gets START/END from its request's flags,
   * READY true and its correlation id; a filler slot (`notReady`) gets START/END/READY false and
   * a zero (or empty string) CORRID, which the model must not rely on.
   */
  tensors(flags: SequenceFlags, id: CorrelationId | undefined, notReady = false): NormalizedInput[] {
    const out: NormalizedInput[] = [];
    const add = (c: BooleanControl | undefined, value: boolean): void => {
      if (c !== undefined) out.push(this.input(c.name, c.datatype, value ? c.trueBytes : c.falseBytes));
    };
    add(this.start, !notReady && flags.start);
    add(this.end, !notReady && flags.end);
    add(this.ready, !notReady);
    if (this.corrid !== undefined) out.push(this.input(this.corrid.name, this.corrid.datatype, encodeCorrelationId(this.corrid.datatype, notReady ? undefined : id)));
    return out;
  }

  private input(name: string, datatype: DataType, data: Uint8Array): NormalizedInput {
    return { name, datatype, shape: [...this.shape], originalShape: [...this.shape], data: Uint8Array.from(data) };
  }
}

/**
 * One CORRID element. Integer ids are written as their low bytes in the control's width (Triton
 * copies the uint64 little-endian into a 4- or 8-byte buffer); a string id is one BYTES element.
 * `undefined` (a filler slot) is zero / the empty string.
 */
export function encodeCorrelationId(datatype: DataType, id: CorrelationId | undefined): Uint8Array {
  if (datatype === 'BYTES') {
    const text = id?.type === 'string' ? Buffer.from(id.value, 'utf8') : Buffer.alloc(0);
    const out = new Uint8Array(4 + text.length);
    new DataView(out.buffer).setUint32(0, text.length, true);
    out.set(text, 4);
    return out;
  }
  const value = id?.type === 'uint64' ? id.value : 0n;
  const wide = new Uint8Array(8);
  new DataView(wide.buffer).setBigUint64(0, value, true);
  return datatype === 'UINT64' || datatype === 'INT64' ? wide : wide.slice(0, 4);
}
