import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { ServerSettings, type LogSettings } from './settings.js';

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (e) {
    if (e instanceof SwitchyardError) return [e.code, e.message];
    throw e;
  }
  throw new Error('expected a throw');
}

describe('ServerSettings: logging', () => {
  it('starts at Triton defaults, overridable', () => {
    expect(new ServerSettings().logSettings()).toEqual({
      log_file: '',
      log_info: true,
      log_warning: true,
      log_error: true,
      log_verbose_level: 0,
      log_format: 'default',
    });
    expect(new ServerSettings({ log_verbose_level: 2 }).logSettings().log_verbose_level).toBe(2);
  });

  it('updates, ignores nulls, notifies listeners', () => {
    const s = new ServerSettings();
    const seen: LogSettings[] = [];
    s.onLogSettingsChange((x) => seen.push(x));
    const out = s.updateLogSettings({ log_info: false, log_verbose_level: 1, log_format: 'ISO8601', log_file: null, log_error: null });
    expect(out).toMatchObject({ log_info: false, log_verbose_level: 1, log_format: 'ISO8601', log_error: true });
    expect(seen).toHaveLength(1);
    expect(s.logSettings()).toEqual(out);
  });

  it('rejects bad values without applying anything', () => {
    const s = new ServerSettings();
    expect(codeOf(() => s.updateLogSettings({ log_file: 'x.log' }))).toEqual([
      'unsupported',
      'log file location can not be updated through network protocol',
    ]);
    expect(codeOf(() => s.updateLogSettings({ log_info: false, log_warning: 'no' }))).toEqual([
      'invalid_argument',
      "expect boolean for 'log_warning'",
    ]);
    expect(codeOf(() => s.updateLogSettings({ log_verbose_level: -1 }))[0]).toBe('invalid_argument');
    expect(codeOf(() => s.updateLogSettings({ log_format: 'json' }))).toEqual([
      'invalid_argument',
      'invalid argument for log_format, got: json',
    ]);
    expect(s.logSettings().log_info).toBe(true);
  });
});

describe('ServerSettings: trace', () => {
  const initial = { trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_file: 'global_unittest.log' };

  it('reports defaults in Triton key order', () => {
    const t = new ServerSettings().traceSettings();
    expect(Object.keys(t)).toEqual(['trace_level', 'trace_rate', 'trace_count', 'log_frequency', 'trace_file', 'trace_mode']);
    expect(t).toEqual({ trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0', trace_file: '', trace_mode: 'triton' });
  });

  it('model settings override global ones field by field (L0_trace update)', () => {
    const s = new ServerSettings(undefined, initial);
    expect(codeOf(() => s.updateTraceSettings('simple', { trace_file: 'model.log' }))).toEqual([
      'unsupported',
      'trace file location can not be updated through network protocol',
    ]);
    expect(s.updateTraceSettings(undefined, { trace_level: ['TENSORS', 'TIMESTAMPS'] }).trace_level).toEqual(['TIMESTAMPS', 'TENSORS']);
    expect(s.traceSettings('simple').trace_level).toEqual(['TIMESTAMPS', 'TENSORS']);
  });

  it('clearing falls back to global (model) or start-up values (global) (L0_trace clear)', () => {
    const s = new ServerSettings(undefined, initial);
    s.updateTraceSettings('simple', { trace_rate: '12', log_frequency: '34' });
    s.updateTraceSettings(undefined, { trace_rate: '56', trace_count: '78', trace_level: ['OFF'] });
    expect(s.updateTraceSettings(undefined, { trace_rate: null, trace_count: null })).toMatchObject({
      trace_level: ['OFF'],
      trace_rate: '1',
      trace_count: '-1',
    });
    expect(s.traceSettings('simple')).toMatchObject({ trace_rate: '12', log_frequency: '34', trace_level: ['OFF'] });
    expect(s.updateTraceSettings('simple', { trace_rate: null, trace_level: null })).toMatchObject({
      trace_rate: '1',
      log_frequency: '34',
      trace_level: ['OFF'],
    });
    // gRPC clears with an empty list
    expect(s.updateTraceSettings('simple', { log_frequency: [] }).log_frequency).toBe('0');
  });

  it('validates numbers like std::stoi and levels like Triton', () => {
    const s = new ServerSettings();
    expect(codeOf(() => s.updateTraceSettings(undefined, { trace_rate: 'abc' }))).toEqual([
      'invalid_argument',
      "Unable to parse 'trace_rate', got: abc",
    ]);
    expect(codeOf(() => s.updateTraceSettings(undefined, { trace_count: '-2' }))).toEqual([
      'invalid_argument',
      "Unable to parse 'trace_count'. Expecting value >= -1, got: -2",
    ]);
    expect(codeOf(() => s.updateTraceSettings(undefined, { trace_rate: '99999999999' }))[1]).toBe(
      "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999",
    );
    expect(codeOf(() => s.updateTraceSettings(undefined, { trace_level: ['OFF', 'TENSORS'] }))).toEqual([
      'invalid_argument',
      "Expect only one trace level 'OFF' is specified",
    ]);
    expect(codeOf(() => s.updateTraceSettings(undefined, { trace_rate: ['1', '2'] }))[1]).toBe("expect only 1 value for 'trace_rate'");
    expect(s.updateTraceSettings(undefined, { trace_rate: '7x' }).trace_rate).toBe('7');
  });
});
