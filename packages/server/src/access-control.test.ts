import { describe, expect, it } from 'vitest';
import type { SwitchyardError } from '@switchyard/common';
import {
  API_GROUPS,
  INCORRECT_API_KEY_MESSAGE,
  MISSING_API_KEY_MESSAGE,
  accessPolicy,
  authorizeHttp,
  checkBearer,
  checkGrpcRestriction,
  grpcMethodGroup,
  httpRouteGroup,
  parseRestrictions,
  secretsEqual,
} from './access-control.js';
import { matchRoute } from './http/http-router.js';

const summary = (e: SwitchyardError | undefined) => (e === undefined ? undefined : [e.code, e.message]);

describe('parseRestrictions (Triton flag syntax and messages)', () => {
  it('maps each listed group to its header and value; gRPC keys get the triton-grpc-protocol- prefix', () => {
    const http = parseRestrictions(['model-repository,shared-memory:Admin-Key=s3=cr3t', 'inference:infer-key=i'], 'http-restricted-api');
    expect([...http]).toEqual([
      ['model-repository', { header: 'Admin-Key', value: 's3=cr3t' }],
      ['shared-memory', { header: 'Admin-Key', value: 's3=cr3t' }],
      ['inference', { header: 'infer-key', value: 'i' }],
    ]);
    const grpc = parseRestrictions(['inference:infer-key=i'], 'grpc-restricted-protocol');
    expect([...grpc]).toEqual([['inference', { header: 'triton-grpc-protocol-infer-key', value: 'i' }]]);
    expect(API_GROUPS).toEqual(['health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging']);
  });

  it("refuses malformed values, unknown groups and a group in two values, with Triton's messages", () => {
    const fails = (values: string[], flag: 'http-restricted-api' | 'grpc-restricted-protocol' = 'http-restricted-api') => {
      try {
        parseRestrictions(values, flag);
      } catch (e) {
        return (e as Error).message;
      }
      return 'accepted';
    };
    for (const bad of ['inference', 'inference:k', ':k=v', 'inference:=v', 'inference:k=', '']) {
      expect(fails([bad])).toBe(`--http-restricted-api option format is '<config name>:<setting>=<value>'. Got ${bad}`);
    }
    expect(fails(['health'], 'grpc-restricted-protocol')).toBe("--grpc-restricted-protocol option format is '<config name>:<setting>=<value>'. Got health");
    expect(fails(['model-reposit,health:k1=v1'])).toBe("unknown restricted api 'model-reposit'");
    expect(fails(['health,:k1=v1'])).toBe("unknown restricted api ''");
    expect(fails(['metrics:k=v'], 'grpc-restricted-protocol')).toBe("unknown restricted protocol 'metrics'");
    expect(fails(['model-repository,health:k1=v1', 'metadata,health:k2=v2'])).toBe("restricted api 'health' can not be specified in multiple config groups");
    expect(fails(['inference:a b=v'])).toBe("--http-restricted-api: 'a b' is not a valid header name. Got inference:a b=v");
    expect(fails(['inference:k= v'])).toContain('printable ASCII without leading or trailing spaces');
    expect(fails(['inference:k=v\n'])).toContain('printable ASCII');
    expect(fails(['inference:k-bin=v'], 'grpc-restricted-protocol')).toContain("names binary metadata ('-bin')");
  });

  it('accessPolicy checks the OpenAI API key too', () => {
    expect(accessPolicy({ httpRestrictedApi: [], grpcRestrictedProtocol: [], openaiApiKey: 'sk-1' }).openaiApiKey).toBe('sk-1');
    expect(() => accessPolicy({ httpRestrictedApi: [], grpcRestrictedProtocol: [], openaiApiKey: '' })).toThrow('--openai-api-key must be');
    expect(() => accessPolicy({ httpRestrictedApi: [], grpcRestrictedProtocol: [], openaiApiKey: 'a b' })).toThrow('--openai-api-key must be');
  });
});

describe('groups of routes and RPCs (Triton http_server.cc / grpc_server.cc)', () => {
  it('puts every HTTP route in its group', () => {
    const group = (path: string) => httpRouteGroup(matchRoute(path)!);
    expect(group('/v2/health/live')).toBe('health');
    expect(group('/v2/health/ready')).toBe('health');
    expect(group('/v2/models/m/ready')).toBe('health');
    expect(group('/v2')).toBe('metadata');
    expect(group('/v2/models/m')).toBe('metadata');
    expect(group('/v2/models/m/versions/1')).toBe('metadata');
    expect(group('/v2/models/m/config')).toBe('model-config');
    expect(group('/v2/models/m/stats')).toBe('statistics');
    expect(group('/v2/models/stats')).toBe('statistics');
    expect(group('/v2/models/m/infer')).toBe('inference');
    expect(group('/v2/models/m/versions/2/generate')).toBe('inference');
    expect(group('/v2/models/m/generate_stream')).toBe('inference');
    expect(group('/v2/repository/index')).toBe('model-repository');
    expect(group('/v2/repository/models/m/load')).toBe('model-repository');
    expect(group('/v2/repository/models/m/unload')).toBe('model-repository');
    expect(group('/v2/systemsharedmemory/region/r/register')).toBe('shared-memory');
    expect(group('/v2/cudasharedmemory/status')).toBe('shared-memory');
    expect(group('/v2/trace/setting')).toBe('trace');
    expect(group('/v2/models/m/trace/setting')).toBe('trace');
    expect(group('/v2/logging')).toBe('logging');
    expect(group('/v1/chat/completions')).toBe('inference');
    expect(group('/v1/completions')).toBe('inference');
    expect(group('/v1/models')).toBe('metadata');
    expect(group('/v1/models/org/m')).toBe('metadata');
  });

  it('puts every RPC in its group', () => {
    const svc = (m: string) => grpcMethodGroup(`/inference.GRPCInferenceService/${m}`);
    expect(['ServerLive', 'ServerReady', 'ModelReady'].map(svc)).toEqual(['health', 'health', 'health']);
    expect(grpcMethodGroup('/grpc.health.v1.Health/Check')).toBe('health');
    expect(['ServerMetadata', 'ModelMetadata'].map(svc)).toEqual(['metadata', 'metadata']);
    expect(['ModelInfer', 'ModelStreamInfer'].map(svc)).toEqual(['inference', 'inference']);
    expect(svc('ModelConfig')).toBe('model-config');
    expect(svc('ModelStatistics')).toBe('statistics');
    expect(['RepositoryIndex', 'RepositoryModelLoad', 'RepositoryModelUnload'].map(svc)).toEqual(Array(3).fill('model-repository'));
    expect(['SystemSharedMemoryStatus', 'SystemSharedMemoryRegister', 'SystemSharedMemoryUnregister', 'CudaSharedMemoryStatus', 'CudaSharedMemoryRegister', 'CudaSharedMemoryUnregister'].map(svc)).toEqual(
      Array(6).fill('shared-memory'),
    );
    expect(svc('TraceSetting')).toBe('trace');
    expect(svc('LogSettings')).toBe('logging');
    expect(grpcMethodGroup('/inference.GRPCInferenceService/constructor')).toBeUndefined();
  });
});

describe('checks', () => {
  const policy = accessPolicy({
    httpRestrictedApi: ['model-repository,metadata:Admin-Key=s3cret'],
    grpcRestrictedProtocol: ['inference:infer-key=i'],
    openaiApiKey: 'sk-test',
  });

  it('HTTP: a restricted group needs its header (name case-insensitive, value exact); others stay open', () => {
    const check = (path: string, headers: Record<string, string>) => summary(authorizeHttp(policy, path, matchRoute(path), headers));
    const refused = ['permission_denied', "This API is restricted, expecting header 'Admin-Key'"];
    expect(check('/v2/repository/index', {})).toEqual(refused);
    expect(check('/v2/repository/index', { 'admin-key': 'S3CRET' })).toEqual(refused);
    expect(check('/v2/repository/index', { 'admin-key': 's3cret ' })).toEqual(refused);
    expect(check('/v2/repository/index', { 'admin-key': 's3cret' })).toBeUndefined();
    expect(check('/v2/models/m/infer', {})).toBeUndefined();
    expect(check('/v2/nope', {})).toBeUndefined();
  });

  it('HTTP /v1: the bearer key first (even for unknown paths), then the groups', () => {
    const check = (path: string, headers: Record<string, string>) => summary(authorizeHttp(policy, path, matchRoute(path), headers));
    expect(check('/v1/chat/completions', {})).toEqual(['unauthenticated', MISSING_API_KEY_MESSAGE]);
    expect(check('/v1/unknown', {})).toEqual(['unauthenticated', MISSING_API_KEY_MESSAGE]);
    expect(check('/v1/chat/completions', { authorization: 'Bearer sk-wrong' })).toEqual(['unauthenticated', INCORRECT_API_KEY_MESSAGE]);
    expect(check('/v1/chat/completions', { authorization: 'Basic sk-test' })).toEqual(['unauthenticated', MISSING_API_KEY_MESSAGE]);
    expect(check('/v1/chat/completions', { authorization: 'bearer sk-test' })).toBeUndefined();
    expect(check('/v1/models', { authorization: 'Bearer sk-test' })).toEqual(['permission_denied', "This API is restricted, expecting header 'Admin-Key'"]);
    expect(check('/v1/models', { authorization: 'Bearer sk-test', 'admin-key': 's3cret' })).toBeUndefined();
  });

  it('gRPC: the prefixed metadata key with the exact value', () => {
    const check = (md: Record<string, string>) => summary(checkGrpcRestriction(policy.grpc, 'inference', (k) => md[k]));
    expect(check({})).toEqual(['permission_denied', "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"]);
    expect(check({ 'infer-key': 'i' })).toEqual(['permission_denied', "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"]);
    expect(check({ 'triton-grpc-protocol-infer-key': 'i' })).toBeUndefined();
    expect(summary(checkGrpcRestriction(policy.grpc, 'health', () => undefined))).toBeUndefined();
  });

  it('no key configured: /v1 stays open; secretsEqual compares content of any length', () => {
    expect(checkBearer(undefined, undefined)).toBeUndefined();
    expect(secretsEqual('abc', 'abc')).toBe(true);
    expect(secretsEqual('abc', 'abcd')).toBe(false);
    expect(secretsEqual('', 'a')).toBe(false);
  });
});
