import { describe, expect, it } from 'vitest';
import { API_GROUPS } from '@switchyard/server';
import { ACCESS_FLAGS, accessFlagDefaults, accessPolicy, type AccessFlagOptions } from './access-flags.js';
import { UsageError, flagHelpLines, parseFlags } from './flags.js';

const parse = (argv: string[]): AccessFlagOptions & { help: boolean } => parseFlags(argv, ACCESS_FLAGS, { ...accessFlagDefaults(), help: false });

describe('access flags', () => {
  it('default to everything open, with fresh arrays each parse', () => {
    expect(accessPolicy(parse([]))).toEqual({ http: new Map(), grpc: new Map() });
    parse(['--http-restricted-api=health:k=v']);
    expect(parse([]).httpRestrictedApi).toEqual([]);
  });

  it('compile to the doors\' policy; a malformed flag is a UsageError with the doors\' message', () => {
    const policy = accessPolicy(parse(['--http-restricted-api=inference:k=v', '--grpc-restricted-protocol', 'health:k=w', '--openai-api-key=sk']));
    expect(policy.http.get('inference')).toEqual({ header: 'k', value: 'v' });
    expect(policy.grpc.get('health')).toEqual({ header: 'triton-grpc-protocol-k', value: 'w' });
    expect(policy.openaiApiKey).toBe('sk');
    expect(() => accessPolicy(parse(['--http-restricted-api=nope:k=v']))).toThrow(new UsageError("unknown restricted api 'nope'"));
  });

  it('the help names every API group', () => {
    expect(flagHelpLines(ACCESS_FLAGS).join('\n')).toContain(API_GROUPS.join(', '));
  });
});
