import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import { decodeReplicaRecord, encodeReplicaRecord, MAX_RECORD_BYTES, pickToDrain, type ReplicaRecord } from './replica-record.js';

const ID = 'decode-lx3k9a-0123abcd';
const record: ReplicaRecord = {
  v: 1,
  id: ID,
  pool: 'decode',
  pid: 4242,
  startTicks: '123456',
  startedAt: 1_764_000_000_000,
  ports: { http_port: 40001, kv_transfer_port: 40002 },
  argv: ['/usr/bin/node', 'bin/switchyard.mjs', 'worker', '--http-port=40001'],
};

const refused = (text: string, fileId: string, pattern: RegExp): void => {
  try {
    decodeReplicaRecord(text, fileId);
  } catch (err) {
    expect(isSwitchyardError(err) && err.code).toBe('invalid_argument');
    expect((err as Error).message).toMatch(pattern);
    return;
  }
  throw new Error(`accepted: ${text.slice(0, 100)}`);
};
const withField = (field: string, value: unknown): string => JSON.stringify({ ...record, [field]: value });

describe('replica records', () => {
  it('round-trip, with and without a drain time', () => {
    expect(decodeReplicaRecord(encodeReplicaRecord(record), ID)).toEqual(record);
    const draining = { ...record, drainingSince: record.startedAt + 5000 };
    expect(decodeReplicaRecord(encodeReplicaRecord(draining), ID)).toEqual(draining);
  });

  it('refuse corrupt, truncated and hostile files', () => {
    const good = encodeReplicaRecord(record);
    refused(good.slice(0, good.length / 2), ID, /not JSON/);
    refused('', ID, /not JSON/);
    refused('[]', ID, /not an object/);
    refused('null', ID, /not an object/);
    refused(' '.repeat(MAX_RECORD_BYTES + 1), ID, /larger than/);
    refused(withField('v', 2), ID, /version 2/);
    refused(good, 'decode-lx3k9a-ffffffff', /does not match the file name/);
    refused(withField('id', '../../etc/passwd'), '../../etc/passwd', /bad id/);
    refused(withField('id', 'decode-x-0123abcd/../../x'), ID, /bad id/);
    refused(withField('pool', 'prefill'), ID, /bad pool/);
    refused(withField('pool', 'gpu'), ID, /bad pool/);
    for (const pid of [0, 1, -1, -4242, 1.5, '4242', 1e9, null]) refused(withField('pid', pid), ID, /bad pid/);
    for (const ticks of [123, '', '12a', '-1', '1'.repeat(21)]) refused(withField('startTicks', ticks), ID, /bad startTicks/);
    refused(withField('startedAt', -1), ID, /bad startedAt/);
    refused(withField('startedAt', 'yesterday'), ID, /bad startedAt/);
    refused(withField('ports', { http_port: 0 }), ID, /bad port http_port/);
    refused(withField('ports', { http_port: 65536 }), ID, /bad port/);
    refused(withField('ports', { ssh_port: 22 }), ID, /unknown port ssh_port/);
    refused(withField('ports', [1, 2]), ID, /bad ports/);
    refused(withField('argv', 'node worker'), ID, /bad argv/);
    refused(withField('argv', [1]), ID, /bad argv/);
    refused(withField('drainingSince', 'soon'), ID, /bad drainingSince/);
  });
});

describe('pickToDrain', () => {
  const at = (id: string, startedAt: number, load?: number) => ({ id, startedAt, ...(load === undefined ? {} : { load }) });

  it('drains the newest first when loads are unknown', () => {
    expect(pickToDrain([at('a', 1), at('c', 3), at('b', 2)], 2)).toEqual(['c', 'b']);
  });

  it('drains the least loaded first, unknown loads last, ties to the newest', () => {
    const replicas = [at('old-idle', 1, 0), at('new-busy', 9, 5), at('mid-idle', 5, 0), at('unknown', 10), at('nan', 11, Number.NaN), at('neg', 12, -1)];
    expect(pickToDrain(replicas, 3)).toEqual(['mid-idle', 'old-idle', 'new-busy']);
    expect(pickToDrain(replicas, 6)).toEqual(['mid-idle', 'old-idle', 'new-busy', 'neg', 'nan', 'unknown']);
  });

  it('is deterministic on full ties and never returns more than asked or than there are', () => {
    expect(pickToDrain([at('b', 1), at('a', 1)], 1)).toEqual(['a']);
    expect(pickToDrain([at('a', 1)], 5)).toEqual(['a']);
    expect(pickToDrain([at('a', 1)], 0)).toEqual([]);
    expect(pickToDrain([at('a', 1)], -1)).toEqual([]);
    expect(pickToDrain([at('a', 1)], 0.5)).toEqual([]);
    expect(pickToDrain([], 3)).toEqual([]);
  });
});
