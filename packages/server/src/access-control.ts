/**
 * Access control for the front doors, as Triton does it, plus an OpenAI-style API key.
 *
 * - Restricted API groups (Triton's `--http-restricted-api` / `--grpc-restricted-protocol`,
 *   `src/restricted_features.h`): each group may require one header (HTTP) or metadata key (gRPC,
 *   prefixed `triton-grpc-protocol-`) with one exact value. Every route and RPC belongs to exactly
 *   one group; a request to a restricted group without the header, or with another value, is
 *   `permission_denied` with Triton's message (HTTP 403, gRPC UNAVAILABLE), before its method is
 *   checked or its body read.
 * - `--openai-api-key`: every `/v1/...` request needs `Authorization: Bearer <key>`, else
 *   `unauthenticated` (401 with OpenAI's error body), checked before routing so unknown paths
 *   reveal nothing either.
 *
 * Secrets are compared in constant time (SHA-256 of both sides, then `timingSafeEqual`, so
 * neither content nor length leaks through timing). Pure: no IO; the doors call these checks and
 * render the errors.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { type SwitchyardError, permissionDenied, unauthenticated } from '@switchyard/common';
import { type Route, isOpenAiPath } from './http/http-router.js';

/** Triton's restricted categories, in its order (`RESTRICTED_CATEGORY_NAMES`). */
export const API_GROUPS = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;
export type ApiGroup = (typeof API_GROUPS)[number];

/**
 * The header (HTTP) or metadata key (gRPC, already prefixed) a restricted group requires, as the
 * flag spelled it (messages quote it so; lookups are case-insensitive), and its value.
 */
export interface Restriction {
  readonly header: string;
  readonly value: string;
}

/** Restricted group → its restriction; a group that is absent is open. */
export type Restrictions = ReadonlyMap<ApiGroup, Restriction>;

/** What the doors of one process enforce. Empty maps and no key = everything open (the default). */
export interface AccessPolicy {
  /** `--http-restricted-api`: KServe routes and, on the same port, the OpenAI routes. */
  readonly http: Restrictions;
  /** `--grpc-restricted-protocol` (metadata keys carry the `triton-grpc-protocol-` prefix). */
  readonly grpc: Restrictions;
  /** `--openai-api-key`: the bearer token every `/v1` request must present; undefined = none. */
  readonly openaiApiKey?: string;
}

export const OPEN_ACCESS: AccessPolicy = { http: new Map(), grpc: new Map() };

/** Triton's prefix for gRPC restriction keys (`kRestrictedProtocolHeaderTemplate`): metadata keys are lowercase. */
export const GRPC_RESTRICTED_KEY_PREFIX = 'triton-grpc-protocol-';

/** RFC 9110 token: what a header name may be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII with inner spaces: what survives as a header / metadata value unchanged. */
const VISIBLE = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * Parse the values of `--http-restricted-api` or `--grpc-restricted-protocol`, each
 * `<group>[,<group>...]:<key>=<value>`, as Triton's `ParseRestrictedFeatureOption` does, with its
 * messages: a malformed value, an unknown group, a group named in two values. Beyond Triton, a key
 * must be a valid header name and a value visible ASCII (anything else could never be sent, and
 * would lock the group for good). Throws `Error` with the message; the apps make it a usage error.
 */
export function parseRestrictions(values: readonly string[], flag: 'http-restricted-api' | 'grpc-restricted-protocol'): Map<ApiGroup, Restriction> {
  const feature = flag === 'http-restricted-api' ? 'api' : 'protocol';
  const out = new Map<ApiGroup, Restriction>();
  for (const arg of values) {
    const colon = arg.indexOf(':');
    const eq = colon < 0 ? -1 : arg.indexOf('=', colon + 1);
    const groups = colon < 0 ? '' : arg.slice(0, colon);
    const key = eq < 0 ? '' : arg.slice(colon + 1, eq);
    const value = eq < 0 ? '' : arg.slice(eq + 1);
    if (groups === '' || key === '' || value === '') {
      throw new Error(`--${flag} option format is '<config name>:<setting>=<value>'. Got ${arg}`);
    }
    if (!TOKEN.test(key)) throw new Error(`--${flag}: '${key}' is not a valid header name. Got ${arg}`);
    if (flag === 'grpc-restricted-protocol' && key.toLowerCase().endsWith('-bin')) {
      throw new Error(`--${flag}: '${key}' names binary metadata ('-bin'); use a text key. Got ${arg}`);
    }
    if (!VISIBLE.test(value)) throw new Error(`--${flag}: the value must be printable ASCII without leading or trailing spaces. Got ${arg}`);
    const header = flag === 'http-restricted-api' ? key : GRPC_RESTRICTED_KEY_PREFIX + key;
    for (const name of groups.split(',')) {
      if (!(API_GROUPS as readonly string[]).includes(name)) throw new Error(`unknown restricted ${feature} '${name}'`);
      const group = name as ApiGroup;
      if (out.has(group)) throw new Error(`restricted ${feature} '${name}' can not be specified in multiple config groups`);
      out.set(group, { header, value });
    }
  }
  return out;
}

/** The access flags as the apps hold them (raw flag values). */
export interface AccessFlags {
  /** `--http-restricted-api` values, repeatable. */
  readonly httpRestrictedApi: readonly string[];
  /** `--grpc-restricted-protocol` values, repeatable. */
  readonly grpcRestrictedProtocol: readonly string[];
  /** `--openai-api-key`; undefined = the OpenAI routes are open. */
  readonly openaiApiKey?: string | undefined;
}

/** The policy the flags ask for; throws `Error` with the message for a malformed flag. */
export function accessPolicy(flags: AccessFlags): AccessPolicy {
  const key = flags.openaiApiKey;
  if (key !== undefined && !/^[\x21-\x7e]+$/.test(key)) {
    throw new Error('--openai-api-key must be a non-empty token of printable ASCII without spaces');
  }
  return {
    http: parseRestrictions(flags.httpRestrictedApi, 'http-restricted-api'),
    grpc: parseRestrictions(flags.grpcRestrictedProtocol, 'grpc-restricted-protocol'),
    ...(key === undefined ? {} : { openaiApiKey: key }),
  };
}

/**
 * The group of an HTTP route (Triton's `HTTPAPIServer::Handle*`). The OpenAI routes on the same
 * port: completions are `inference`, `/v1/models[/{id}]` is `metadata` (restricting the load API
 * with `model-repository` leaves the OpenAI clients' model list alone).
 */
export function httpRouteGroup(route: Route): ApiGroup {
  switch (route.kind) {
    case 'health':
      return 'health';
    case 'server_metadata':
      return 'metadata';
    case 'stats':
      return 'statistics';
    case 'logging':
      return 'logging';
    case 'trace':
      return 'trace';
    case 'system_shm':
    case 'cuda_shm':
      return 'shared-memory';
    case 'repository_index':
    case 'repository_control':
      return 'model-repository';
    case 'openai':
      // Listing models is metadata, as `GET /v2/models/{m}` is; the load API stays apart.
      return route.action === 'models' || route.action === 'model' ? 'metadata' : 'inference';
    case 'model':
      switch (route.action) {
        case 'metadata':
          return 'metadata';
        case 'ready':
          return 'health';
        case 'config':
          return 'model-config';
        case 'stats':
          return 'statistics';
        case 'infer':
        case 'generate':
        case 'generate_stream':
          return 'inference';
      }
  }
}

/** Full gRPC method path → group (Triton's `grpc_server.cc` registrations); undefined for methods we do not serve. */
const GRPC_METHOD_GROUPS: Readonly<Record<string, ApiGroup>> = {
  '/grpc.health.v1.Health/Check': 'health',
  '/grpc.health.v1.Health/Watch': 'health',
  '/inference.GRPCInferenceService/ServerLive': 'health',
  '/inference.GRPCInferenceService/ServerReady': 'health',
  '/inference.GRPCInferenceService/ModelReady': 'health',
  '/inference.GRPCInferenceService/ServerMetadata': 'metadata',
  '/inference.GRPCInferenceService/ModelMetadata': 'metadata',
  '/inference.GRPCInferenceService/ModelInfer': 'inference',
  '/inference.GRPCInferenceService/ModelStreamInfer': 'inference',
  '/inference.GRPCInferenceService/ModelConfig': 'model-config',
  '/inference.GRPCInferenceService/ModelStatistics': 'statistics',
  '/inference.GRPCInferenceService/RepositoryIndex': 'model-repository',
  '/inference.GRPCInferenceService/RepositoryModelLoad': 'model-repository',
  '/inference.GRPCInferenceService/RepositoryModelUnload': 'model-repository',
  '/inference.GRPCInferenceService/SystemSharedMemoryStatus': 'shared-memory',
  '/inference.GRPCInferenceService/SystemSharedMemoryRegister': 'shared-memory',
  '/inference.GRPCInferenceService/SystemSharedMemoryUnregister': 'shared-memory',
  '/inference.GRPCInferenceService/CudaSharedMemoryStatus': 'shared-memory',
  '/inference.GRPCInferenceService/CudaSharedMemoryRegister': 'shared-memory',
  '/inference.GRPCInferenceService/CudaSharedMemoryUnregister': 'shared-memory',
  '/inference.GRPCInferenceService/TraceSetting': 'trace',
  '/inference.GRPCInferenceService/LogSettings': 'logging',
};

export function grpcMethodGroup(path: string): ApiGroup | undefined {
  return Object.hasOwn(GRPC_METHOD_GROUPS, path) ? GRPC_METHOD_GROUPS[path] : undefined;
}

/**
 * The HTTP check: permission_denied with Triton's message when `group` is restricted and the
 * request's header (looked up by lowercase name) is absent or differs; else undefined.
 */
export function checkHttpRestriction(restrictions: Restrictions, group: ApiGroup, headerValue: (name: string) => string | undefined): SwitchyardError | undefined {
  const r = restrictions.get(group);
  if (r === undefined) return undefined;
  const actual = headerValue(r.header.toLowerCase());
  if (actual !== undefined && secretsEqual(actual, r.value)) return undefined;
  return permissionDenied(`This API is restricted, expecting header '${r.header}'`);
}

/** The gRPC check, as `checkHttpRestriction` with Triton's gRPC message. */
export function checkGrpcRestriction(restrictions: Restrictions, group: ApiGroup, metadataValue: (key: string) => string | undefined): SwitchyardError | undefined {
  const r = restrictions.get(group);
  if (r === undefined) return undefined;
  const actual = metadataValue(r.header.toLowerCase());
  if (actual !== undefined && secretsEqual(actual, r.value)) return undefined;
  return permissionDenied(`This protocol is restricted, expecting header '${r.header}'`);
}

/**
 * Everything the HTTP door checks before serving `path` (matched to `route`, undefined = 404):
 * the API key for `/v1` paths (before routing), then the route's group. The error to answer, or
 * undefined to serve.
 */
export function authorizeHttp(policy: AccessPolicy, path: string, route: Route | undefined, headers: IncomingHttpHeaders): SwitchyardError | undefined {
  const header = (name: string): string | undefined => {
    const v = headers[name];
    return typeof v === 'string' ? v : undefined;
  };
  if (isOpenAiPath(path)) {
    const refused = checkBearer(policy.openaiApiKey, header('authorization'));
    if (refused !== undefined) return refused;
  }
  return route === undefined ? undefined : checkHttpRestriction(policy.http, httpRouteGroup(route), header);
}

/** OpenAI's message when no key is sent, and when a wrong one is (the key itself is never echoed). */
export const MISSING_API_KEY_MESSAGE =
  "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
export const INCORRECT_API_KEY_MESSAGE = 'Incorrect API key provided.';

/** `Authorization: Bearer <key>` against `--openai-api-key`: unauthenticated when missing or wrong. */
export function checkBearer(apiKey: string | undefined, authorization: string | undefined): SwitchyardError | undefined {
  if (apiKey === undefined) return undefined;
  const m = authorization === undefined ? null : /^Bearer +(\S+) *$/i.exec(authorization);
  if (m === null) return unauthenticated(MISSING_API_KEY_MESSAGE);
  return secretsEqual(m[1] as string, apiKey) ? undefined : unauthenticated(INCORRECT_API_KEY_MESSAGE);
}

/** Digests of the configured secrets (a handful per process), so each check hashes only what was sent. */
const expectedDigests = new Map<string, Buffer>();

/** Constant-time equality of a presented secret and the expected one, of any lengths. */
export function secretsEqual(presented: string, expected: string): boolean {
  let digest = expectedDigests.get(expected);
  if (digest === undefined) {
    digest = sha256(expected);
    if (expectedDigests.size < 64) expectedDigests.set(expected, digest);
  }
  return timingSafeEqual(sha256(presented), digest);
}

function sha256(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}
