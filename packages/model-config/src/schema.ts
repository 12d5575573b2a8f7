/**
 * Reflection over `proto/model_config.proto`, shared by the text parser, the JSON parser, the
 * JSON renderer and normalisation.
 *
 * The schema is the single source of truth for field names, numbers, declaration order, types
 * and defaults: nothing in this package hard-codes the ModelConfig field list. The .proto file
 * is read once, lazily, on first use (the only file IO this package does).
 */
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/** The repository's `proto/` directory; the same relative path works from `src/` and `dist/`. */
export const PROTO_DIR_URL = new URL('../../../proto/', import.meta.url);

let cachedRoot: protobuf.Root | undefined;

/** The protobufjs root holding `inference.*` from model_config.proto (field names as declared). */
export function modelConfigProtoRoot(): protobuf.Root {
  if (cachedRoot === undefined) {
    const file = fileURLToPath(new URL('model_config.proto', PROTO_DIR_URL));
    const root = new protobuf.Root().loadSync(file, { keepCase: true });
    root.resolveAll();
    cachedRoot = root;
  }
  return cachedRoot;
}

/** Look up a message type by its name relative to package `inference` (e.g. `ModelConfig`). */
export function messageType(name: string): protobuf.Type {
  return modelConfigProtoRoot().lookupType(`inference.${name}`);
}

/** The fully qualified name without protobufjs's leading dot (`inference.ModelInput`). */
export function qualifiedName(t: protobuf.ReflectionObject): string {
  return t.fullName.startsWith('.') ? t.fullName.slice(1) : t.fullName;
}

/** Scalar protobuf types, grouped by how their values are checked and represented. */
export type IntKind = 'int32' | 'uint32' | 'int64' | 'uint64';
export type ScalarKind = IntKind | 'float' | 'double' | 'bool' | 'string' | 'bytes';

const INT_KINDS: Record<string, IntKind> = {
  int32: 'int32',
  sint32: 'int32',
  sfixed32: 'int32',
  uint32: 'uint32',
  fixed32: 'uint32',
  int64: 'int64',
  sint64: 'int64',
  sfixed64: 'int64',
  uint64: 'uint64',
  fixed64: 'uint64',
};

/** Classify a protobuf scalar type name; undefined for message and enum types. */
export function scalarKind(protoType: string): ScalarKind | undefined {
  const i = INT_KINDS[protoType];
  if (i !== undefined) return i;
  if (
    protoType === 'float' ||
    protoType === 'double' ||
    protoType === 'bool' ||
    protoType === 'string' ||
    protoType === 'bytes'
  ) {
    return protoType;
  }
  return undefined;
}

export const INT_RANGES: Record<IntKind, readonly [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

export const FLOAT32_MAX = 3.4028234663852886e38;

/**
 * What one value slot holds: a scalar, an enum, or a message. Fields and the two halves of a map
 * entry (`key`, `value`) are all described this way so parsers handle them uniformly.
 */
export type ValueSlot =
  | { readonly name: string; readonly kind: 'scalar'; readonly scalar: ScalarKind }
  | { readonly name: string; readonly kind: 'enum'; readonly enumType: protobuf.Enum }
  | { readonly name: string; readonly kind: 'message'; readonly messageType: protobuf.Type };

/** The slot of a field's element (for a map field: of its value). */
export function valueSlot(field: protobuf.Field | protobuf.MapField): ValueSlot {
  const rt = field.resolvedType;
  if (rt instanceof protobuf.Type) return { name: field.name, kind: 'message', messageType: rt };
  if (rt instanceof protobuf.Enum) return { name: field.name, kind: 'enum', enumType: rt };
  const scalar = scalarKind(field.type);
  if (scalar === undefined) throw new Error(`unresolved protobuf type '${field.type}' for '${field.name}'`);
  return { name: field.name, kind: 'scalar', scalar };
}

/** The key slot of a map field. */
export function mapKeySlot(field: protobuf.MapField): ValueSlot {
  const scalar = scalarKind(field.keyType);
  if (scalar === undefined) throw new Error(`invalid map key type '${field.keyType}'`);
  return { name: 'key', kind: 'scalar', scalar };
}

export function isMapField(field: protobuf.Field | protobuf.MapField): field is protobuf.MapField {
  return field instanceof protobuf.MapField;
}

/**
 * The field of `type` named exactly `name`. Own names only: protobufjs keeps fields in a plain
 * object, so `type.fields['constructor']` would be Object's constructor.
 */
export function fieldNamed(type: protobuf.Type, name: string): protobuf.Field | undefined {
  return Object.prototype.hasOwnProperty.call(type.fields, name) ? type.fields[name] : undefined;
}

/** True when `name` is a value name of `enumType` (own names only: protobufjs's `values` inherits the ids). */
export function isEnumName(enumType: protobuf.Enum, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(enumType.values, name);
}

/** Store one map entry as data: a key such as `__proto__` becomes an own entry, never the map's prototype. */
export function setMapEntry(map: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Name of an enum value by number, or undefined when the number is not declared. */
export function enumNameOf(enumType: protobuf.Enum, value: number): string | undefined {
  return enumType.valuesById[value];
}

/** The proto3 default of one slot value (sub-messages default to a filled-in empty message). */
export function defaultSlotValue(slot: ValueSlot): unknown {
  switch (slot.kind) {
    case 'message':
      return defaultMessage(slot.messageType);
    case 'enum':
      return enumNameOf(slot.enumType, 0) ?? 0;
    case 'scalar':
      return defaultScalar(slot.scalar);
  }
}

export function defaultScalar(kind: ScalarKind): unknown {
  switch (kind) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'bytes':
      return new Uint8Array(0);
    default:
      return 0;
  }
}

/**
 * A message with every scalar, repeated (`[]`) and map (`{}`) field present at its proto3
 * default, and no sub-message or oneof member set. Keys follow declaration order.
 */
export function defaultMessage(type: protobuf.Type): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    if (field.partOf !== null) continue;
    if (isMapField(field)) out[field.name] = {};
    else if (field.repeated) out[field.name] = [];
    else {
      const slot = valueSlot(field);
      if (slot.kind !== 'message') out[field.name] = defaultSlotValue(slot);
    }
  }
  return out;
}

/** protobuf's lowerCamelCase JSON name of a field (`max_batch_size` -> `maxBatchSize`). */
export function jsonNameOf(fieldName: string): string {
  let out = '';
  let upper = false;
  for (const ch of fieldName) {
    if (ch === '_') {
      upper = true;
    } else {
      out += upper ? ch.toUpperCase() : ch;
      upper = false;
    }
  }
  return out;
}

/** The JS number for an integer if it fits `kind`, else undefined. Beyond 2^53 precision is lost. */
export function integerValue(v: bigint, kind: IntKind): number | undefined {
  const [lo, hi] = INT_RANGES[kind];
  return v < lo || v > hi ? undefined : Number(v);
}
