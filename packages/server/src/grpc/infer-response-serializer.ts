/**
 * ModelInfer / ModelStreamInfer response serializers: kserve's `grpc-wire` encoders, which write
 * the bytes the protos' own serializer writes without its per-response protobufjs message objects;
 * a response outside the shapes they handle goes through the protos' serializer, unchanged.
 */
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { encodeModelInferResponseBytes, encodeModelStreamInferResponseBytes, type GrpcModelInferResponse, type GrpcModelStreamInferResponse } from '@switchyard/kserve';

type Serialize<T> = (value: T) => Buffer;

/** `encode`, else the protos' serializer `fallback`. */
function withFallback<T>(encode: (value: T) => Buffer | undefined, fallback: Serialize<T>): Serialize<T> {
  return (value: T): Buffer => encode(value) ?? fallback(value);
}

/** The ModelInfer response serializer of `service` (inference.GRPCInferenceService), fast path first. */
export function modelInferResponseSerializer(service: ServiceDefinition): Serialize<GrpcModelInferResponse> {
  const method = service['ModelInfer'] as MethodDefinition<unknown, GrpcModelInferResponse>;
  return withFallback(encodeModelInferResponseBytes, method.responseSerialize);
}

/** The ModelStreamInfer response serializer of `service`, fast path first. */
export function modelStreamInferResponseSerializer(service: ServiceDefinition): Serialize<GrpcModelStreamInferResponse> {
  const method = service['ModelStreamInfer'] as MethodDefinition<unknown, GrpcModelStreamInferResponse>;
  return withFallback(encodeModelStreamInferResponseBytes, method.responseSerialize);
}

/**
 * `service` with the ModelInfer and ModelStreamInfer response serializers above. The shared
 * definition is not changed (clients use it too).
 */
export function withFastInferResponseEncoding(service: ServiceDefinition): ServiceDefinition {
  return {
    ...service,
    ModelInfer: { ...(service['ModelInfer'] as MethodDefinition<unknown, unknown>), responseSerialize: modelInferResponseSerializer(service) },
    ModelStreamInfer: { ...(service['ModelStreamInfer'] as MethodDefinition<unknown, unknown>), responseSerialize: modelStreamInferResponseSerializer(service) },
  } as ServiceDefinition;
}
