import { describe, expect, it } from 'vitest';
import { allowedMethods, matchRoute } from './http-router.js';
import { responseEncoding } from './http-body.js';

describe('matchRoute', () => {
  it('follows Triton routing', () => {
    expect(matchRoute('/v2/models/stats')).toEqual({ kind: 'stats' });
    expect(matchRoute('/v2/models/m/versions/3/stats')).toEqual({ kind: 'stats', model: 'm', version: '3' });
    expect(matchRoute('/v2/models/my%20model/infer')).toEqual({ kind: 'model', action: 'infer', model: 'my model' });
    expect(matchRoute('/v2/models/m')).toEqual({ kind: 'model', action: 'metadata', model: 'm' });
    expect(matchRoute('/v2/models/m/trace/setting')).toEqual({ kind: 'trace', model: 'm' });
    expect(matchRoute('/v2/models/m/versions/1/trace/setting')).toBeUndefined();
    expect(matchRoute('/v2/models/m/versions/x')).toBeUndefined();
    expect(matchRoute('/v2/models/m/infer/')).toBeUndefined();
    expect(matchRoute('/v2')).toEqual({ kind: 'server_metadata' });
    expect(matchRoute('/v2/')).toBeUndefined();
    expect(matchRoute('/v2/health/ready')).toEqual({ kind: 'health', which: 'ready' });
    expect(matchRoute('/v2/systemsharedmemory/region/r/register')).toEqual({ kind: 'system_shm', region: 'r', action: 'register' });
    expect(matchRoute('/v2/cudasharedmemory/status')).toEqual({ kind: 'cuda_shm', action: 'status' });
    expect(matchRoute('/v2/repository/index')).toEqual({ kind: 'repository_index' });
    expect(matchRoute('/v2/repository/r1/models/m/unload')).toEqual({ kind: 'repository_control', repository: 'r1', model: 'm', action: 'unload' });
    expect(matchRoute('/v2/trace/setting')).toEqual({ kind: 'trace' });
    expect(matchRoute('/v2/logging')).toEqual({ kind: 'logging' });
  });

  it('matches the OpenAI routes; a model id takes the rest of the path, percent-decoded', () => {
    expect(matchRoute('/v1/chat/completions')).toEqual({ kind: 'openai', action: 'chat_completions' });
    expect(matchRoute('/v1/completions')).toEqual({ kind: 'openai', action: 'completions' });
    expect(matchRoute('/v1/models')).toEqual({ kind: 'openai', action: 'models' });
    expect(matchRoute('/v1/models/Qwen%2FQwen3-0.6B')).toEqual({ kind: 'openai', action: 'model', model: 'Qwen/Qwen3-0.6B' });
    expect(matchRoute('/v1/models/org/name')).toEqual({ kind: 'openai', action: 'model', model: 'org/name' });
    expect(matchRoute('/v1/embeddings')).toEqual({ kind: 'openai', action: 'embeddings' });
    expect(matchRoute('/v1/audio/speech')).toBeUndefined();
    expect(allowedMethods({ kind: 'openai', action: 'embeddings' })).toEqual(['POST']);
    expect(allowedMethods({ kind: 'openai', action: 'completions' })).toEqual(['POST']);
    expect(allowedMethods({ kind: 'openai', action: 'model', model: 'm' })).toEqual(['GET']);
  });

  it('knows the allowed methods', () => {
    expect(allowedMethods({ kind: 'model', action: 'infer', model: 'm' })).toEqual(['POST']);
    expect(allowedMethods({ kind: 'system_shm', action: 'status' })).toEqual(['GET']);
    expect(allowedMethods({ kind: 'trace' })).toEqual(['GET', 'POST']);
  });
});

describe('responseEncoding (Triton CompressionTypeUsed)', () => {
  it('picks the highest q among identity/deflate/gzip, first wins ties', () => {
    expect(responseEncoding(undefined)).toBe('identity');
    expect(responseEncoding('gzip')).toBe('gzip');
    expect(responseEncoding('gzip, deflate')).toBe('gzip');
    expect(responseEncoding('deflate;q=0.5, gzip;q=0.4')).toBe('deflate');
    expect(responseEncoding('br, gzip;q=0')).toBe('identity');
    expect(responseEncoding('identity;q=1, gzip;q=0.9')).toBe('identity');
    expect(responseEncoding(' gzip;q=abc, deflate;q=0.1')).toBe('deflate');
    expect(responseEncoding('*')).toBe('identity');
  });
});
