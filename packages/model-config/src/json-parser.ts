/**
 * `parseModelConfigJson`: the load-override form of a model configuration (the `config`
 * parameter of a repository load request) -> ModelConfig plain object.
 *
 * Protobuf JSON rules as Triton applies them (`JsonStringToMessage` with unknown fields
 * rejected and case-insensitive enum names): field names as declared or lowerCamelCase; enums as
 * names or numbers; 64-bit integers as numbers or decimal strings; floats as numbers or
 * "NaN"/"Infinity"/"-Infinity"; bytes as base64; `null` leaves a field at its default.
 * The output has the same shape as `parseModelConfigText`'s.
 *
 * Failures are `invalid_argument`; callers add their own context (the engine prefixes
 * "failed to load").
 */
import { describeValue, invalidArgument } from '@switchyard/common';
import type protobuf from 'protobufjs';
import {
  FLOAT32_MAX,
  defaultMessage,
  defaultSlotValue,
  enumNameOf,
  fieldNamed,
  integerValue,
  isEnumName,
  isMapField,
  jsonNameOf,
  mapKeySlot,
  messageType,
  qualifiedName,
  setMapEntry,
  valueSlot,
  type IntKind,
  type ValueSlot,
} from './schema.js';
import type { ModelConfig } from './types.js';

type Obj = Record<string, unknown>;

/** Parse a ModelConfig from its JSON form. */
export function parseModelConfigJson(json: string): ModelConfig {
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch (e) {
    throw invalidArgument(`invalid model configuration JSON: ${(e as Error).message}`, e);
  }
  return parseMessage(messageType('ModelConfig'), doc, '') as unknown as ModelConfig;
}

function fail(path: string, what: string): never {
  throw invalidArgument(`invalid model configuration JSON${path === '' ? '' : ` at '${path}'`}: ${what}`);
}

const isPlainObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseMessage(type: protobuf.Type, json: unknown, path: string): Obj {
  if (!isPlainObject(json)) fail(path, `expected an object for message ${qualifiedName(type)}`);
  const out = defaultMessage(type);
  const byJsonName = new Map(type.fieldsArray.map((f) => [jsonNameOf(f.name), f] as const));
  const seen = new Set<string>();
  const oneofSet = new Map<string, string>();

  for (const [key, value] of Object.entries(json)) {
    const field = fieldNamed(type, key) ?? byJsonName.get(key);
    if (field === undefined) fail(path, `message ${qualifiedName(type)} has no field named '${key}'`);
    const fpath = path === '' ? field.name : `${path}.${field.name}`;
    if (seen.has(field.name)) fail(fpath, `field '${field.name}' is given more than once`);
    seen.add(field.name);
    if (value === null) continue; // null means "default" for every field type used in ModelConfig

    const oneof = field.partOf;
    if (oneof !== null) {
      const other = oneofSet.get(oneof.name);
      if (other !== undefined) {
        fail(fpath, `field '${field.name}' and field '${other}' are both members of oneof '${oneof.name}'`);
      }
      oneofSet.set(oneof.name, field.name);
    }

    const slot = valueSlot(field);
    if (isMapField(field)) {
      if (!isPlainObject(value)) fail(fpath, 'expected an object for a map field');
      const keySlot = mapKeySlot(field);
      const map: Obj = {};
      for (const [k, v] of Object.entries(value)) {
        setMapEntry(map, parseMapKey(keySlot, k, fpath), v === null ? defaultSlotValue(slot) : parseValue(slot, v, `${fpath}[${k}]`));
      }
      out[field.name] = map;
    } else if (field.repeated) {
      if (!Array.isArray(value)) fail(fpath, 'expected an array for a repeated field');
      out[field.name] = value.map((v, i) => {
        if (v === null) fail(`${fpath}[${i}]`, 'null is not allowed in a repeated field');
        return parseValue(slot, v, `${fpath}[${i}]`);
      });
    } else {
      out[field.name] = parseValue(slot, value, fpath);
    }
  }
  return out;
}

function parseValue(slot: ValueSlot, v: unknown, path: string): unknown {
  switch (slot.kind) {
    case 'message':
      return parseMessage(slot.messageType, v, path);
    case 'enum':
      return parseEnum(slot.enumType, v, path);
    case 'scalar':
      switch (slot.scalar) {
        case 'bool':
          if (typeof v !== 'boolean') fail(path, `expected a boolean, got ${describeValue(v)}`);
          return v;
        case 'string':
          if (typeof v !== 'string') fail(path, `expected a string, got ${describeValue(v)}`);
          return v;
        case 'bytes':
          if (typeof v !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) fail(path, 'expected a base64 string');
          return new Uint8Array(Buffer.from(v, 'base64'));
        case 'float':
        case 'double':
          return parseFloatValue(slot.scalar, v, path);
        default:
          return parseIntegerValue(slot.scalar, v, path);
      }
  }
}

function parseEnum(enumType: protobuf.Enum, v: unknown, path: string): string {
  if (typeof v === 'string') {
    if (isEnumName(enumType, v)) return v;
    const upper = v.toUpperCase();
    const match = Object.keys(enumType.values).find((n) => n.toUpperCase() === upper);
    if (match !== undefined) return match;
    fail(path, `invalid enum value '${v}' for enum type ${qualifiedName(enumType)}`);
  }
  if (typeof v === 'number' && Number.isInteger(v)) {
    const name = enumNameOf(enumType, v);
    if (name !== undefined) return name;
  }
  return fail(path, `invalid enum value ${describeValue(v)} for enum type ${qualifiedName(enumType)}`);
}

function parseIntegerValue(kind: IntKind, v: unknown, path: string): number {
  let big: bigint | undefined;
  if (typeof v === 'number' && Number.isInteger(v)) big = BigInt(v);
  else if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) {
    // Past 20 significant digits no 64-bit value fits: refused without BigInt (superlinear parse).
    if (v.trim().replace(/^-?0*/, '').length > 20) fail(path, `integer ${v} is out of range for ${kind}`);
    big = BigInt(v.trim());
  }
  if (big === undefined) fail(path, `expected an integer, got ${describeValue(v)}`);
  const n = integerValue(big, kind);
  if (n === undefined) fail(path, `integer ${String(v)} is out of range for ${kind}`);
  return n;
}

function parseFloatValue(kind: 'float' | 'double', v: unknown, path: string): number {
  let n: number | undefined;
  if (typeof v === 'number') n = v;
  else if (v === 'NaN') n = NaN;
  else if (v === 'Infinity') n = Infinity;
  else if (v === '-Infinity') n = -Infinity;
  else if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) n = Number(v);
  if (n === undefined) fail(path, `expected a number, got ${describeValue(v)}`);
  if (kind === 'float' && Number.isFinite(n) && Math.abs(n) > FLOAT32_MAX) fail(path, `float ${n} is out of range`);
  return n;
}

/** JSON object keys of a map field, validated against the key type and rendered canonically. */
function parseMapKey(slot: ValueSlot, k: string, path: string): string {
  if (slot.kind !== 'scalar') return k;
  switch (slot.scalar) {
    case 'string':
      return k;
    case 'bool':
      if (k !== 'true' && k !== 'false') fail(path, `invalid map key '${k}' for a bool key`);
      return k;
    case 'int32':
    case 'uint32':
    case 'int64':
    case 'uint64':
      return String(parseIntegerValue(slot.scalar, k, `${path}[${k}]`));
    default:
      return fail(path, `unsupported map key type ${slot.scalar}`);
  }
}
