import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONNECTORS, DEFAULT_CONNECTOR, defaultStateDir } from './parts.js';

describe('parts', () => {
  it('local is the default connector; memory stays for dry runs', () => {
    expect(DEFAULT_CONNECTOR).toBe('local');
    expect([...CONNECTORS].sort()).toEqual(['kubernetes', 'local', 'memory']);
  });

  it('the default state directory is one per namespace and model, under the OS temporary directory, path-safe', () => {
    const a = defaultStateDir('prod', 'org/model:v1');
    expect(a).toBe(defaultStateDir('prod', 'org/model:v1'));
    expect(dirname(a)).toBe(join(tmpdir(), 'switchyard-planner', 'prod'));
    expect(basename(a)).toMatch(/^org_model_v1-[0-9a-f]{8}$/);
    // names that sanitise alike still differ; other namespaces differ
    expect(defaultStateDir('prod', 'org_model_v1')).not.toBe(a);
    expect(defaultStateDir('dev', 'org/model:v1')).not.toBe(a);
    expect(basename(defaultStateDir('ns', '../'.repeat(100)))).toMatch(/^[._]{64}-[0-9a-f]{8}$/);
  });
});
