/**
 * Conversions between the config enum (`TYPE_FP32`) and the protocol datatype string (`FP32`).
 * The only irregular pair is TYPE_STRING <-> BYTES.
 */
import { invalidArgument } from '@switchyard/common';
import type { DataType } from '@switchyard/kserve';
import type { DataTypeName } from './types.js';

const CONFIG_TO_WIRE: Readonly<Record<Exclude<DataTypeName, 'TYPE_INVALID'>, DataType>> = {
  TYPE_BOOL: 'BOOL',
  TYPE_UINT8: 'UINT8',
  TYPE_UINT16: 'UINT16',
  TYPE_UINT32: 'UINT32',
  TYPE_UINT64: 'UINT64',
  TYPE_INT8: 'INT8',
  TYPE_INT16: 'INT16',
  TYPE_INT32: 'INT32',
  TYPE_INT64: 'INT64',
  TYPE_FP16: 'FP16',
  TYPE_FP32: 'FP32',
  TYPE_FP64: 'FP64',
  TYPE_STRING: 'BYTES',
  TYPE_BF16: 'BF16',
};

const WIRE_TO_CONFIG: ReadonlyMap<string, DataTypeName> = new Map(
  Object.entries(CONFIG_TO_WIRE).map(([config, wire]) => [wire, config as DataTypeName]),
);

/** `TYPE_FP32` -> `FP32`, `TYPE_STRING` -> `BYTES`. TYPE_INVALID (or an unknown name) throws invalid_argument. */
export function configDataTypeToWire(t: DataTypeName): DataType {
  const wire = (CONFIG_TO_WIRE as Record<string, DataType | undefined>)[t];
  if (wire === undefined) throw invalidArgument(`invalid data type '${t}'`);
  return wire;
}

/** `FP32` -> `TYPE_FP32`, `BYTES` -> `TYPE_STRING`; anything else -> `TYPE_INVALID` (as Triton's mapping does). */
export function wireDataTypeToConfig(d: string): DataTypeName {
  return WIRE_TO_CONFIG.get(d) ?? 'TYPE_INVALID';
}
