import { describe, expect, it } from 'vitest';
import { UsageError } from '@switchyard/cli';
import { DEFAULT_TRACE_CONFIG } from '@switchyard/server';
import { parseWorkerArgs } from './options.js';
import { traceConfigOf } from './trace-options.js';

const parse = (...args: string[]) => traceConfigOf(parseWorkerArgs(['--model-repository=/m', ...args]));
const refusal = (...args: string[]): string => {
  try {
    parse(...args);
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    throw e;
  }
  throw new Error('accepted');
};

describe('trace flags', () => {
  it('default: triton mode, level OFF, rate 1000, count -1', () => {
    expect(parse().config).toEqual(DEFAULT_TRACE_CONFIG);
  });

  it('--trace-config global and triton settings (L0_trace)', () => {
    const { config, warnings } = parse('--trace-config=triton,file=/tmp/t.json', '--trace-config', 'triton,log-frequency=50', '--trace-config=rate=100', '--trace-config=level=TIMESTAMPS', '--trace-config=count=100');
    expect(config).toMatchObject({ mode: 'triton', file: '/tmp/t.json', logFrequency: 50, rate: 100, level: ['TIMESTAMPS'], count: 100 });
    expect(warnings).toEqual([]);
  });

  it('levels add up, OFF anywhere disables, and the old spellings work', () => {
    expect(parse('--trace-config=level=TENSORS', '--trace-config=level=timestamps').config.level).toEqual(['TIMESTAMPS', 'TENSORS']);
    expect(parse('--trace-config=level=max', '--trace-config=level=off').config.level).toEqual([]);
    expect(refusal('--trace-config=level=LOUD')).toBe('Bad option: "--trace-config level".\ninvalid value for trace level option: LOUD');
  });

  it('deprecated flags still work, with warnings; --trace-config wins', () => {
    const { config, warnings } = parse('--trace-file=/tmp/a.json', '--trace-level=TIMESTAMPS', '--trace-rate=5', '--trace-count=7', '--trace-log-frequency=3', '--trace-config=rate=9');
    expect(config).toMatchObject({ file: '/tmp/a.json', level: ['TIMESTAMPS'], rate: 9, count: 7, logFrequency: 3 });
    expect(warnings).toContain("'--trace-rate' has been deprecated and will be removed in future releases. Please use '--trace-config rate=<rate value> instead.");
    expect(warnings).toContain("Overriding deprecated '--trace-rate' in favor of provided rate value in --trace-config!");
  });

  it('opentelemetry settings: url, resources, batch span processor', () => {
    const { config, warnings } = parse(
      '--trace-config=mode=opentelemetry',
      '--trace-config=opentelemetry,url=localhost:4318/v1/traces',
      '--trace-config=opentelemetry,resource=service.name=svc',
      '--trace-config=opentelemetry,resource=a=b=c',
      '--trace-config=opentelemetry,bsp_max_queue_size=100',
      '--trace-config=opentelemetry,bsp_schedule_delay=0',
      '--trace-config=opentelemetry,bsp_max_export_batch_size=10',
      '--trace-file=/ignored',
    );
    expect(config.mode).toBe('opentelemetry');
    expect(config.otel).toEqual({ url: 'localhost:4318/v1/traces', resource: { 'service.name': 'svc', a: 'b=c' }, bspMaxQueueSize: 100, bspScheduleDelayMs: 0, bspMaxExportBatchSize: 10 });
    expect(config.file).toBe('');
    expect(warnings).toContain("'--trace-file' is deprecated and will be ignored with opentelemetry tracing mode.");
    expect(parse('--trace-config=mode=opentelemetry', '--trace-config=level=TENSORS').warnings).toEqual([
      'Tensor level tracing is not supported by the mode: OPENTELEMETRY; only TIMESTAMPS are traced',
    ]);
  });

  it.each([
    ['--trace-config=,level=OFF', 'No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> or <setting>=<value>. Got ,level=OFF'],
    ['--trace-config=rate', "--trace-config option format is '<trace mode>,<setting>=<value>'. Got rate"],
    ['--trace-config=rate=', "--trace-config option format is '<trace mode>,<setting>=<value>'. Got rate="],
    ['--trace-config=jaeger,url=x', 'invalid value for trace mode option: jaeger. Available options are "triton" and "opentelemetry"'],
    ['--trace-config=rate=abc', 'Invalid option value. Got abc'],
    ['--trace-config=rate=99999999999', 'Provided option value is out of bound. Got 99999999999'],
    ['--trace-config=count=-2', 'trace count must be -1 (no limit) or more, got -2'],
    ['--trace-config=levle=OFF', "unknown global trace setting 'levle'"],
    ['--trace-config=triton,url=x', "unknown 'triton' trace setting 'url'"],
  ])('%s is refused', (arg, message) => {
    expect(refusal(arg)).toContain(message);
  });

  it('opentelemetry values are bounded and checked', () => {
    const otel = (s: string) => refusal('--trace-config=mode=opentelemetry', `--trace-config=opentelemetry,${s}`);
    expect(otel('url=ftp://x/v1/traces')).toContain("expected an http:// or https:// URL, got 'ftp://x/v1/traces'");
    expect(otel('bsp_max_queue_size=0')).toContain('expected an integer from 1 to 65536, got 0');
    expect(otel('bsp_max_queue_size=1e9')).toContain('Invalid option value. Got 1e9');
    expect(otel('bsp_max_export_batch_size=4096')).toContain('must be at most bsp_max_queue_size (2048), got 4096');
    expect(otel('resource==x')).toContain('expected <key>=<value>, got =x');
  });

  it('rate and log frequency wrap like the uint32 Triton keeps them in', () => {
    expect(parse('--trace-config=rate=-1').config.rate).toBe(4294967295);
    expect(parse('--trace-config=rate=12abc').config.rate).toBe(12);
  });
});
