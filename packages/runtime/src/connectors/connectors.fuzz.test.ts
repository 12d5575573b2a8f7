/**
 * Fuzz properties of the local connector's two decode edges: a state file (whatever a crash, a disk
 * or a hand left in `<stateDir>/replicas/`) is a record or an invalid_argument, and an accepted one
 * never names a path outside the directory or a process group; a template (whatever an operator or a
 * flag parser hands in) is a template or an invalid_argument, and expanding an accepted one leaves no
 * placeholder behind.
 */
import { describe, expect, it } from 'vitest';
import { anyText, fc, fuzz, hostileJsonValue, jsonText, mutatedJson, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { decodeReplicaRecord, encodeReplicaRecord, REPLICA_ID_PATTERN, type ReplicaRecord } from './replica-record.js';
import { expandWorkerTemplate, parseWorkerTemplate, PORT_PLACEHOLDERS } from './worker-template.js';

const ID = 'prefill-lx3k9a-0123abcd';
const VALID: ReplicaRecord = {
  v: 1,
  id: ID,
  pool: 'prefill',
  pid: 31337,
  startTicks: '98765',
  startedAt: 1_764_000_000_000,
  ports: { http_port: 40001, grpc_port: 40002, metrics_port: 40003, kv_transfer_port: 40004 },
  argv: ['node', 'bin/switchyard.mjs', 'worker'],
  drainingSince: 1_764_000_100_000,
};

describe('replica records (fuzz)', () => {
  it('decodes or refuses any text, any JSON and any one-field corruption; what it accepts is safe to act on', () => {
    expect(decodeReplicaRecord(encodeReplicaRecord(VALID), ID)).toEqual(VALID);
    const texts = fc.oneof(
      anyText(200),
      fc.oneof(hostileJsonValue(), fc.jsonValue({ maxDepth: 3 }), mutatedJson(fc.constant(VALID as unknown as JsonValue))).map((v) => jsonText(v as JsonValue)),
    );
    fuzz(fc.tuple(texts, fc.oneof(fc.constant(ID), anyText(30))), ([text, fileId]) => {
      const r = parsesOrRefuses(() => decodeReplicaRecord(text, fileId));
      if (!r.ok) return;
      expect(r.value.id).toBe(fileId);
      expect(r.value.id).toMatch(REPLICA_ID_PATTERN);
      expect(r.value.pid).toBeGreaterThanOrEqual(2);
    });
  });
});

describe('worker templates (fuzz)', () => {
  const piece = fc.oneof(
    fc.constantFrom('{', '}', '{{', '}}', '--x=', '{http_port}', '{grpc_port}', '{metrics_port}', '{kv_transfer_port}', '{replica}', '{pool}', '{nope}', '{}', '{{http_port}}'),
    fc.string({ maxLength: 6 }),
  );
  const arg = fc.array(piece, { maxLength: 6 }).map((p) => p.join(''));

  it('parses or refuses any argument list; an accepted one expands to arguments without placeholders', () => {
    fuzz(fc.oneof(fc.array(arg, { maxLength: 8 }), fc.array(anyText(20), { maxLength: 4 }), hostileJsonValue()), (args) => {
      const r = parsesOrRefuses(() => parseWorkerTemplate(args));
      if (!r.ok) return;
      const ports = Object.fromEntries(PORT_PLACEHOLDERS.map((p, i) => [p, 50_000 + i]));
      const out = expandWorkerTemplate(r.value, { replica: 'R', pool: 'P', ports });
      expect(out).toHaveLength((args as string[]).length);
      // every brace left is a literal one that was doubled in the template
      const braces = (s: string) => (s.match(/[{}]/g) ?? []).length;
      const literal = (args as string[]).map((a) => (a.match(/\{\{|\}\}/g) ?? []).length);
      out.forEach((o, i) => expect(braces(o)).toBe(literal[i]));
    });
  });
});
