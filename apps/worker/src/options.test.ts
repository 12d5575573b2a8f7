import { describe, expect, it } from 'vitest';
import { DEFAULTS, UsageError, helpText, parseWorkerArgs } from './options.js';

describe('parseWorkerArgs', () => {
  it('applies tritonserver defaults', () => {
    const o = parseWorkerArgs(['--model-repository', '/models']);
    expect(o.modelRepositories).toEqual(['/models']);
    expect(o.httpPort).toBe(8000);
    expect(o.grpcPort).toBe(8001);
    expect(o.metricsPort).toBe(8002);
    expect(o.controlMode).toBe('none');
    expect(o.httpMaxInputSize).toBe(64 * 1024 * 1024);
    expect(o.allowClientShm).toBe(false);
    expect(o).toMatchObject(DEFAULTS);
  });

  it('accepts repeated repositories and startup models, = and space forms', () => {
    const o = parseWorkerArgs([
      '--model-repository=/a',
      '--model-repository',
      '/b',
      '--model-control-mode=explicit',
      '--load-model=simple',
      '--load-model',
      'mlp',
      '--http-port=9000',
    ]);
    expect(o.modelRepositories).toEqual(['/a', '/b']);
    expect(o.startupModels).toEqual(['simple', 'mlp']);
    expect(o.controlMode).toBe('explicit');
    expect(o.httpPort).toBe(9000);
  });

  it('parses booleans as tritonserver does: =true, bare, and a following literal', () => {
    expect(parseWorkerArgs(['--model-repository=/m', '--allow-client-shm=true']).allowClientShm).toBe(true);
    expect(parseWorkerArgs(['--model-repository=/m', '--allow-client-shm']).allowClientShm).toBe(true);
    expect(parseWorkerArgs(['--allow-client-shm', 'false', '--model-repository=/m']).allowClientShm).toBe(false);
    expect(parseWorkerArgs(['--model-repository=/m', '--strict-model-config=false']).strictModelConfig).toBe(false);
  });

  it('rejects bad usage with a UsageError', () => {
    expect(() => parseWorkerArgs([])).toThrow(UsageError);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--bogus'])).toThrow(/unknown flag '--bogus'/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--http-port=abc'])).toThrow(/integer/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--model-control-mode=sometimes'])).toThrow(/one of/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--load-model=simple'])).toThrow(/explicit/);
    expect(() =>
      parseWorkerArgs(['--model-repository=/m', '--model-control-mode=explicit', '--load-model=*', '--load-model=simple']),
    ).toThrow("Wildcard model name '*' must be the ONLY startup model if specified at all.");
    expect(() => parseWorkerArgs(['--model-repository=/m', '--allow-client-shm=maybe'])).toThrow(/true or false/);
    expect(() => parseWorkerArgs(['--model-repository'])).toThrow(/needs a value/);
  });

  it('--help needs nothing else and lists every flag', () => {
    expect(parseWorkerArgs(['--help']).help).toBe(true);
    const text = helpText();
    for (const flag of ['--model-repository', '--http-port', '--grpc-port', '--metrics-port', '--model-control-mode', '--load-model', '--strict-model-config', '--repository-poll-secs', '--allow-client-shm', '--http-max-input-size', '--log-verbose', '--log-format']) {
      expect(text).toContain(flag);
    }
  });
});
