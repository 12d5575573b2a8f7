import { describe, expect, it } from 'vitest';
import { configDataTypeToWire, wireDataTypeToConfig } from './datatype.js';
import type { DataTypeName } from './types.js';

describe('datatype conversion', () => {
  it('maps config enums to protocol strings and back', () => {
    const pairs: [DataTypeName, string][] = [
      ['TYPE_BOOL', 'BOOL'], ['TYPE_UINT8', 'UINT8'], ['TYPE_UINT16', 'UINT16'], ['TYPE_UINT32', 'UINT32'],
      ['TYPE_UINT64', 'UINT64'], ['TYPE_INT8', 'INT8'], ['TYPE_INT16', 'INT16'], ['TYPE_INT32', 'INT32'],
      ['TYPE_INT64', 'INT64'], ['TYPE_FP16', 'FP16'], ['TYPE_FP32', 'FP32'], ['TYPE_FP64', 'FP64'],
      ['TYPE_STRING', 'BYTES'], ['TYPE_BF16', 'BF16'],
    ];
    for (const [config, wire] of pairs) {
      expect(configDataTypeToWire(config)).toBe(wire);
      expect(wireDataTypeToConfig(wire)).toBe(config);
    }
  });

  it('rejects TYPE_INVALID and maps unknown protocol strings to TYPE_INVALID', () => {
    expect(() => configDataTypeToWire('TYPE_INVALID')).toThrow(/invalid data type 'TYPE_INVALID'/);
    expect(wireDataTypeToConfig('STRING')).toBe('TYPE_INVALID');
    expect(wireDataTypeToConfig('fp32')).toBe('TYPE_INVALID');
  });
});
