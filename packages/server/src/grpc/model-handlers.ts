/**
 * Health, metadata, configuration, statistics and repository RPCs of
 * `inference.GRPCInferenceService`, plus `grpc.health.v1.Health/Check`. Each is a thin
 * translation between proto plain objects and the engine; semantics and messages follow
 * Triton's `server:src/grpc/grpc_server.cc`.
 */
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { invalidArgument, unsupported } from '@switchyard/common';
import type { LoadModelOptions } from '@switchyard/engine';
import { parseModelVersion } from '@switchyard/kserve';
import { unary, type GrpcContext } from './grpc-context.js';

interface NameVersion {
  name: string;
  version: string;
}

/** `ModelRepositoryParameter`: oneof { bool_param=1, int64_param=2, string_param=3, bytes_param=4 }. */
interface RepositoryParameter {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'bytes_param';
  bool_param?: boolean;
  int64_param?: string | number;
  string_param?: string;
  bytes_param?: Uint8Array;
}

interface RepositoryRequest {
  repository_name: string;
  model_name: string;
  parameters: Record<string, RepositoryParameter>;
}

const REPOSITORY_NAME_UNSUPPORTED = "'repository_name' specification is not supported";

function choice(p: RepositoryParameter): RepositoryParameter['parameter_choice'] {
  if (p.parameter_choice !== undefined) return p.parameter_choice;
  if (p.bool_param !== undefined) return 'bool_param';
  if (p.int64_param !== undefined) return 'int64_param';
  if (p.string_param !== undefined) return 'string_param';
  if (p.bytes_param !== undefined) return 'bytes_param';
  return undefined;
}

/** Triton's load parameters: `config` (string_param, ModelConfig JSON) and `file:<path>` (bytes_param). */
export function loadOptions(parameters: Record<string, RepositoryParameter> | undefined): LoadModelOptions {
  const options: LoadModelOptions = {};
  for (const [key, p] of Object.entries(parameters ?? {})) {
    if (key === 'config') {
      if (choice(p) !== 'string_param') throw invalidArgument(`invalid value type for load parameter '${key}', expected string_param.`);
      options.config = p.string_param ?? '';
    } else if (key.startsWith('file:')) {
      if (choice(p) !== 'bytes_param') throw invalidArgument(`invalid value type for load parameter '${key}', expected bytes_param.`);
      const bytes = p.bytes_param ?? new Uint8Array(0);
      options.files ??= new Map();
      options.files.set(key.slice('file:'.length), new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } else {
      throw invalidArgument(`unrecognized load parameter '${key}'.`);
    }
  }
  return options;
}

/** Triton reads only the first `unload_dependents` entry and requires a bool_param. */
function unloadDependents(parameters: Record<string, RepositoryParameter> | undefined): boolean {
  const p = parameters?.['unload_dependents'];
  if (p === undefined) return false;
  if (choice(p) !== 'bool_param') throw invalidArgument("invalid value type for 'unload_dependents' parameter, expected bool_param.");
  return p.bool_param === true;
}

export function modelHandlers(ctx: GrpcContext): UntypedServiceImplementation {
  const { engine } = ctx;
  return {
    ServerLive: unary(ctx, () => ({ live: engine.isLive() })),
    ServerReady: unary(ctx, () => ({ ready: engine.isReady() })),
    // Unknown or unready models are OK + ready=false (qa/L0_lifecycle expects no error); only a
    // malformed version string is an error.
    ModelReady: unary(ctx, (req: NameVersion) => ({ ready: engine.isModelReady(req.name, parseModelVersion(req.version)) })),
    ServerMetadata: unary(ctx, () => engine.serverMetadata()),
    ModelMetadata: unary(ctx, (req: NameVersion) => engine.modelMetadata(req.name, parseModelVersion(req.version))),
    // The engine's ModelConfig plain object has the proto's field names, enum names and oneof
    // members, so it serialises as-is.
    ModelConfig: unary(ctx, (req: NameVersion) => ({ config: engine.modelConfig(req.name, parseModelVersion(req.version)) })),
    ModelStatistics: unary(ctx, async (req: NameVersion) => ({
      model_stats: await engine.modelStatistics(req.name === '' ? undefined : req.name, parseModelVersion(req.version)),
    })),
    RepositoryIndex: unary(ctx, async (req: { repository_name: string; ready: boolean }) => {
      if (req.repository_name !== '') throw unsupported(REPOSITORY_NAME_UNSUPPORTED);
      const rows = await engine.repositoryIndex(req.ready);
      return {
        models: rows.map((r) => ({ name: r.name, version: r.version ?? '', state: r.state ?? '', reason: r.reason ?? '' })),
      };
    }),
    RepositoryModelLoad: unary(ctx, async (req: RepositoryRequest) => {
      if (req.repository_name !== '') throw unsupported(REPOSITORY_NAME_UNSUPPORTED);
      await engine.loadModel(req.model_name, loadOptions(req.parameters));
      return {};
    }),
    RepositoryModelUnload: unary(ctx, async (req: RepositoryRequest) => {
      if (req.repository_name !== '') throw unsupported(REPOSITORY_NAME_UNSUPPORTED);
      await engine.unloadModel(req.model_name, { unloadDependents: unloadDependents(req.parameters) });
      return {};
    }),
  };
}

/** `grpc.health.v1.Health`: Check follows server readiness. Watch is left UNIMPLEMENTED, as in Triton. */
export function healthHandlers(ctx: GrpcContext): UntypedServiceImplementation {
  return {
    Check: unary(ctx, () => ({ status: ctx.engine.isReady() ? 'SERVING' : 'NOT_SERVING' })),
  };
}
