/**
 * Loading the wire contract: `proto/grpc_service.proto` (+ `model_config.proto`) and
 * `proto/health.proto`, read at run time with @grpc/proto-loader.
 *
 * Loader options are part of the contract with the codec (`@switchyard/kserve` grpc-messages):
 * snake_case field names, 64-bit integers as decimal strings (uint64 sequence ids and int64
 * tensor contents keep every bit; the codec converts), enums as names, defaults filled, and a
 * virtual `parameter_choice` naming the set member of each oneof.
 */
import { fileURLToPath } from 'node:url';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';

/** The repository's `proto/` directory; this file sits at `packages/server/{src,dist}/grpc/`. */
export const PROTO_DIR = fileURLToPath(new URL('../../../../proto/', import.meta.url));

export const PROTO_LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export interface GrpcProtos {
  packageDefinition: PackageDefinition;
  /** `inference.GRPCInferenceService`. */
  inferenceService: ServiceDefinition;
  /** `grpc.health.v1.Health`. */
  healthService: ServiceDefinition;
}

let cached: GrpcProtos | undefined;

/** Parse the protos once per process; every server (and test client) shares the result. */
export function loadGrpcProtos(): GrpcProtos {
  if (cached !== undefined) return cached;
  const packageDefinition = loadSync(['grpc_service.proto', 'health.proto'], PROTO_LOADER_OPTIONS);
  cached = {
    packageDefinition,
    inferenceService: packageDefinition['inference.GRPCInferenceService'] as ServiceDefinition,
    healthService: packageDefinition['grpc.health.v1.Health'] as ServiceDefinition,
  };
  return cached;
}
