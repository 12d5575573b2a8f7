/**
 * `renderModelConfigJson`: a ModelConfig plain object -> the exact JSON Triton serves from
 * `GET /v2/models/{m}/config`.
 *
 * Triton prints the proto with `preserve_proto_field_names` and `always_print_primitive_fields`
 * (fields in declaration order; every scalar, repeated and map field printed; unset
 * sub-messages and oneof members omitted; enums as names), then rewrites a fixed list of 64-bit
 * fields from protobuf's JSON strings to JSON numbers (`ModelConfigToJson` in core
 * model_config_utils.cc). 64-bit fields outside that list stay strings, as in Triton. The output
 * is compact, like rapidjson's writer. Map entries are printed in key order.
 */
import type protobuf from 'protobufjs';
import { isMapField, mapKeySlot, messageType, valueSlot, type ValueSlot } from './schema.js';
import type { ModelConfig } from './types.js';

/**
 * Paths (field names from ModelConfig; `value` for a map's values) of the 64-bit fields Triton
 * renders as JSON numbers. Triton's fix-up of `sequence_batching.state.initial_state.dims` looks
 * in the wrong object, so that field (like the cuda graph dims and secondary device ids) keeps
 * protobuf's string form.
 */
const INT64_AS_NUMBER = new Set([
  'input.dims',
  'input.reshape.shape',
  'output.dims',
  'output.reshape.shape',
  'version_policy.specific.versions',
  'dynamic_batching.max_queue_delay_microseconds',
  'dynamic_batching.priority_levels',
  'dynamic_batching.default_priority_level',
  'dynamic_batching.default_queue_policy.default_timeout_microseconds',
  'dynamic_batching.priority_queue_policy.value.default_timeout_microseconds',
  'sequence_batching.max_sequence_idle_microseconds',
  'sequence_batching.oldest.max_queue_delay_microseconds',
  'sequence_batching.direct.max_queue_delay_microseconds',
  'sequence_batching.state.dims',
  'ensemble_scheduling.step.model_version',
  'model_warmup.inputs.value.dims',
]);

/** Render a (normalised) ModelConfig as Triton's compact `/config` JSON. */
export function renderModelConfigJson(config: ModelConfig): string {
  return renderMessage(messageType('ModelConfig'), config as unknown as Record<string, unknown>, '');
}

function renderMessage(type: protobuf.Type, obj: Record<string, unknown>, path: string): string {
  const parts: string[] = [];
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    const fpath = path === '' ? field.name : `${path}.${field.name}`;
    const slot = valueSlot(field);
    let text: string;
    if (isMapField(field)) {
      const entries = Object.entries((value ?? {}) as Record<string, unknown>);
      const keySlot = mapKeySlot(field);
      entries.sort(([a], [b]) => compareKeys(keySlot, a, b));
      const vpath = `${fpath}.value`;
      text = `{${entries.map(([k, v]) => `${quote(k)}:${renderValue(slot, v, vpath)}`).join(',')}}`;
    } else if (field.repeated) {
      text = `[${((value ?? []) as unknown[]).map((v) => renderValue(slot, v, fpath)).join(',')}]`;
    } else if (field.partOf !== null || slot.kind === 'message') {
      if (value === undefined || value === null) continue; // unset sub-message or oneof member
      text = renderValue(slot, value, fpath);
    } else {
      text = renderValue(slot, value ?? defaultScalarFor(slot), fpath);
    }
    parts.push(`${quote(field.name)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

function renderValue(slot: ValueSlot, v: unknown, path: string): string {
  switch (slot.kind) {
    case 'message':
      return renderMessage(slot.messageType, v as Record<string, unknown>, path);
    case 'enum':
      return quote(typeof v === 'number' ? (slot.enumType.valuesById[v] ?? String(v)) : String(v));
    case 'scalar':
      switch (slot.scalar) {
        case 'bool':
          return v === true ? 'true' : 'false';
        case 'string':
          return quote(String(v));
        case 'bytes':
          return quote(Buffer.from(v as Uint8Array).toString('base64'));
        case 'float':
          return renderFloat(Number(v), true);
        case 'double':
          return renderFloat(Number(v), false);
        case 'int64':
        case 'uint64':
          return INT64_AS_NUMBER.has(path) ? String(v) : quote(String(v));
        default:
          return String(v);
      }
  }
}

function defaultScalarFor(slot: ValueSlot): unknown {
  if (slot.kind === 'enum') return 0;
  if (slot.kind === 'scalar') return slot.scalar === 'bool' ? false : slot.scalar === 'string' ? '' : 0;
  return undefined;
}

/**
 * protobuf prints non-finite values as strings and a float with 6 significant digits when that
 * round-trips through float32, else 9 (`SimpleFtoa`); rapidjson then re-prints the number.
 */
function renderFloat(v: number, single: boolean): string {
  if (Number.isNaN(v)) return '"NaN"';
  if (v === Infinity) return '"Infinity"';
  if (v === -Infinity) return '"-Infinity"';
  if (!single) return String(v);
  const f = Math.fround(v);
  const six = Number(f.toPrecision(6));
  return String(Math.fround(six) === f ? six : Number(f.toPrecision(9)));
}

function compareKeys(slot: ValueSlot, a: string, b: string): number {
  if (slot.kind === 'scalar' && slot.scalar !== 'string' && slot.scalar !== 'bool') {
    const d = BigInt(a) - BigInt(b);
    return d < 0n ? -1 : d > 0n ? 1 : 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A JSON string literal as rapidjson writes it (control characters escaped, upper-case hex). */
function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c < 0x20) {
      const short: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
      out += short[c] ?? `\\u${c.toString(16).toUpperCase().padStart(4, '0')}`;
    } else out += ch;
  }
  return `${out}"`;
}
