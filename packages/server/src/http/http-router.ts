/**
 * Route matching for the KServe v2 / Triton HTTP API, in Triton's order (`HTTPAPIServer::Handle`).
 *
 * Pure: a path (query string already removed) in, a route out; `pathOf` and `versionOf` read a URL's
 * path and a version segment. Methods are not part of
 * matching: a matched route with the wrong method answers 405, an unmatched path 404, as in
 * Triton. Version segments are digits only, so `/versions/abc/...` does not match (404).
 * Path segments are percent-decoded after matching.
 *
 * The OpenAI routes (`/v1/...`, as vLLM serves them) share the table; a model id may contain '/'
 * (`Qwen/Qwen3-0.6B`), so `/v1/models/{id}` takes the rest of the path.
 */
import { invalidArgument } from '@switchyard/common';

export type ModelAction = 'metadata' | 'ready' | 'infer' | 'generate' | 'generate_stream' | 'config' | 'stats';
export type OpenAiAction = 'chat_completions' | 'completions' | 'embeddings' | 'models' | 'model';
export type ShmAction = 'status' | 'register' | 'unregister';

export type Route =
  | { kind: 'stats'; model?: string; version?: string }
  | { kind: 'logging' }
  | { kind: 'model'; action: ModelAction; model: string; version?: string }
  | { kind: 'trace'; model?: string }
  | { kind: 'server_metadata' }
  | { kind: 'health'; which: 'live' | 'ready' }
  | { kind: 'system_shm'; region?: string; action: ShmAction }
  | { kind: 'cuda_shm'; region?: string; action: ShmAction }
  | { kind: 'repository_index'; repository?: string }
  | { kind: 'repository_control'; repository?: string; model: string; action: 'load' | 'unload' }
  /** `model` only with action 'model' (`GET /v1/models/{id}`). */
  | { kind: 'openai'; action: OpenAiAction; model?: string };

const MODEL_RE = /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?(?:\/(infer|generate|generate_stream|ready|config|stats|trace\/setting))?$/;
const HEALTH_RE = /^\/v2\/health\/(live|ready)$/;
const SYSTEM_SHM_RE = /^\/v2\/systemsharedmemory(?:\/region\/([^/]+))?\/(status|register|unregister)$/;
const CUDA_SHM_RE = /^\/v2\/cudasharedmemory(?:\/region\/([^/]+))?\/(status|register|unregister)$/;
const REPOSITORY_RE = /^\/v2\/repository(?:\/([^/]+))?\/(?:(index)|models\/([^/]+)\/(load|unload))$/;

const OPENAI_ROUTES: Readonly<Record<string, OpenAiAction>> = {
  '/v1/chat/completions': 'chat_completions',
  '/v1/completions': 'completions',
  '/v1/embeddings': 'embeddings',
  '/v1/models': 'models',
};
const OPENAI_MODEL_RE = /^\/v1\/models\/(.+)$/;

/** The path of a request URL (the query string is ignored by every route). */
export function pathOf(url: string | undefined): string {
  const u = url ?? '/';
  const q = u.indexOf('?');
  return q === -1 ? u : u.slice(0, q);
}

/** A route's version segment as a number; throws invalid_argument (Triton's message) past the safe integers. */
export function versionOf(v: string | undefined): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw invalidArgument(`failed to get model version from specified version string '${v}'`);
  return n;
}

/** The path belongs to the OpenAI API (its errors are rendered OpenAI's way, even a 404). */
export function isOpenAiPath(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}

/** Match `path` to a route, or undefined for 404. */
export function matchRoute(path: string): Route | undefined {
  if (isOpenAiPath(path)) {
    const action = OPENAI_ROUTES[path];
    if (action !== undefined) return { kind: 'openai', action };
    const m = OPENAI_MODEL_RE.exec(path);
    return m === null ? undefined : { kind: 'openai', action: 'model', model: decode(m[1] as string) };
  }
  if (path === '/v2/models/stats') return { kind: 'stats' };
  if (path === '/v2/logging') return { kind: 'logging' };

  const m = MODEL_RE.exec(path);
  if (m !== null) {
    const model = decode(m[1] as string);
    const version = m[2];
    const suffix = m[3];
    if (suffix === 'trace/setting') {
      // Trace settings have no version form; Triton falls through to 404.
      if (version === undefined) return { kind: 'trace', model };
    } else if (suffix === 'stats') {
      return { kind: 'stats', model, ...opt('version', version) };
    } else {
      const action: ModelAction = suffix === undefined ? 'metadata' : (suffix as ModelAction);
      return { kind: 'model', action, model, ...opt('version', version) };
    }
  }

  if (path === '/v2') return { kind: 'server_metadata' };
  const h = HEALTH_RE.exec(path);
  if (h !== null) return { kind: 'health', which: h[1] as 'live' | 'ready' };
  const s = SYSTEM_SHM_RE.exec(path);
  if (s !== null) return { kind: 'system_shm', action: s[2] as ShmAction, ...opt('region', decodeOpt(s[1])) };
  const c = CUDA_SHM_RE.exec(path);
  if (c !== null) return { kind: 'cuda_shm', action: c[2] as ShmAction, ...opt('region', decodeOpt(c[1])) };
  const r = REPOSITORY_RE.exec(path);
  if (r !== null) {
    const repository = opt('repository', decodeOpt(r[1]));
    if (r[2] === 'index') return { kind: 'repository_index', ...repository };
    return { kind: 'repository_control', model: decode(r[3] as string), action: r[4] as 'load' | 'unload', ...repository };
  }
  if (path === '/v2/trace/setting') return { kind: 'trace' };
  return undefined;
}

const GET: readonly string[] = Object.freeze(['GET']);
const POST: readonly string[] = Object.freeze(['POST']);
const GET_POST: readonly string[] = Object.freeze(['GET', 'POST']);

/** The methods a route accepts; anything else is 405. (Shared lists: this runs for every request.) */
export function allowedMethods(route: Route): readonly string[] {
  switch (route.kind) {
    case 'logging':
    case 'trace':
      return GET_POST;
    case 'model':
      return route.action === 'infer' || route.action === 'generate' || route.action === 'generate_stream' ? POST : GET;
    case 'system_shm':
    case 'cuda_shm':
      return route.action === 'status' ? GET : POST;
    case 'repository_index':
    case 'repository_control':
      return POST;
    case 'openai':
      return route.action === 'models' || route.action === 'model' ? GET : POST;
    default:
      return GET;
  }
}

/** `{ [key]: value }` when value is defined, else `{}` (optional route fields stay absent). */
function opt<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}

function decodeOpt(segment: string | undefined): string | undefined {
  return segment === undefined ? undefined : decode(segment);
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
