import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { expandWorkerTemplate, MAX_TEMPLATE_ARGS, MAX_TEMPLATE_ARG_LENGTH, parseWorkerTemplate } from './worker-template.js';

const refused = (f: () => unknown, pattern: RegExp): void => {
  try {
    f();
  } catch (err) {
    expect(isSwitchyardError(err) && err.code).toBe('invalid_argument');
    expect((err as Error).message).toMatch(pattern);
    return;
  }
  throw new Error('not refused');
};

describe('worker templates', () => {
  it('expands every placeholder, each port its own value, literal braces kept', () => {
    const t = parseWorkerTemplate([
      '--model-repository=/m',
      '--http-port={http_port}',
      '--grpc-port={grpc_port}',
      '--metrics-port={metrics_port}',
      '--kv-transfer-port={kv_transfer_port}',
      '--tag={pool}/{replica}:{http_port}',
      '{{"json": true}}',
    ]);
    expect(t.ports).toEqual(['http_port', 'grpc_port', 'metrics_port', 'kv_transfer_port']);
    expect(expandWorkerTemplate(t, { replica: 'decode-abc-0123abcd', pool: 'decode', ports: { http_port: 1001, grpc_port: 1002, metrics_port: 1003, kv_transfer_port: 1004 } })).toEqual([
      '--model-repository=/m',
      '--http-port=1001',
      '--grpc-port=1002',
      '--metrics-port=1003',
      '--kv-transfer-port=1004',
      '--tag=decode/decode-abc-0123abcd:1001',
      '{"json": true}',
    ]);
  });

  it('lists only the ports a template uses, in one fixed order', () => {
    expect(parseWorkerTemplate(['--metrics-port={metrics_port}', '--http-port={http_port}']).ports).toEqual(['http_port', 'metrics_port']);
    expect(parseWorkerTemplate(['--model-repository=/m']).ports).toEqual([]);
    expect(expandWorkerTemplate(parseWorkerTemplate(['']), { replica: 'r', pool: 'aggregated', ports: {} })).toEqual(['']);
  });

  it('refuses bad templates with a clear error', () => {
    refused(() => parseWorkerTemplate('--http-port=1'), /list of arguments/);
    refused(() => parseWorkerTemplate([]), /empty/);
    refused(() => parseWorkerTemplate(['--x', 7]), /argument 1 is not a string/);
    refused(() => parseWorkerTemplate(['--http-port={http}']), /unknown placeholder \{http\}.*\{http_port\}/);
    refused(() => parseWorkerTemplate(['--x={HTTP_PORT}']), /unknown placeholder/);
    refused(() => parseWorkerTemplate(['--x={}']), /unknown placeholder \{\}/);
    refused(() => parseWorkerTemplate(['--x={http_port']), /unclosed '\{'/);
    refused(() => parseWorkerTemplate(['--x=http_port}']), /unpaired '\}'/);
    refused(() => parseWorkerTemplate(['--x={{http_port}']), /unpaired '\}'/);
    refused(() => parseWorkerTemplate(['a\0b']), /NUL/);
    refused(() => parseWorkerTemplate(['x'.repeat(MAX_TEMPLATE_ARG_LENGTH + 1)]), /longer than/);
    refused(() => parseWorkerTemplate(Array.from({ length: MAX_TEMPLATE_ARGS + 1 }, () => 'a')), /at most/);
    refused(() => parseWorkerTemplate(['{' + 'a'.repeat(5000)]), /longer than/);
  });

  it('refuses to expand a port placeholder without a valid port', () => {
    const t = parseWorkerTemplate(['--http-port={http_port}']);
    refused(() => expandWorkerTemplate(t, { replica: 'r', pool: 'aggregated', ports: {} }), /no port for \{http_port\}/);
    refused(() => expandWorkerTemplate(t, { replica: 'r', pool: 'aggregated', ports: { http_port: 70000 } }), /no port/);
  });
});
