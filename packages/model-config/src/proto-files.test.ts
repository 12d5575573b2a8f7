import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { PROTO_DIR_URL } from './schema.js';

// The .proto files under /proto are loaded by the gRPC front door (proto-loader) and by this
// package (protobufjs); both must accept them and see upstream's field numbers.
const protoDir = fileURLToPath(PROTO_DIR_URL);

function loadRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('/') ? target : `${protoDir}${target}`);
  root.loadSync(['grpc_service.proto', 'health.proto'], { keepCase: true });
  root.resolveAll();
  return root;
}

describe('proto files', () => {
  it('load with @grpc/proto-loader using the options the server uses', () => {
    const defs = protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [protoDir],
    });
    const service = defs['inference.GRPCInferenceService'] as Record<string, { path: string; requestStream: boolean; responseStream: boolean }>;
    expect(Object.keys(service)).toEqual([
      'ServerLive', 'ServerReady', 'ModelReady', 'ServerMetadata', 'ModelMetadata', 'ModelInfer',
      'ModelStreamInfer', 'ModelConfig', 'ModelStatistics', 'RepositoryIndex', 'RepositoryModelLoad',
      'RepositoryModelUnload', 'SystemSharedMemoryStatus', 'SystemSharedMemoryRegister',
      'SystemSharedMemoryUnregister', 'CudaSharedMemoryStatus', 'CudaSharedMemoryRegister',
      'CudaSharedMemoryUnregister', 'TraceSetting', 'LogSettings',
    ]);
    expect(service['ModelInfer']?.path).toBe('/inference.GRPCInferenceService/ModelInfer');
    expect(service['ModelStreamInfer']).toMatchObject({ requestStream: true, responseStream: true });
    const health = defs['grpc.health.v1.Health'] as Record<string, { path: string; responseStream: boolean }>;
    expect(health['Check']?.path).toBe('/grpc.health.v1.Health/Check');
    expect(health['Watch']?.responseStream).toBe(true);
  });

  it('carry upstream field numbers', () => {
    const root = loadRoot();
    const id = (type: string, field: string): number | undefined => root.lookupType(type).fields[field]?.id;
    expect(id('inference.ModelInferRequest', 'raw_input_contents')).toBe(7);
    expect(id('inference.ModelInferResponse', 'raw_output_contents')).toBe(6);
    expect(id('inference.ModelInferRequest.InferInputTensor', 'contents')).toBe(5);
    expect(id('inference.InferParameter', 'uint64_param')).toBe(5);
    expect(id('inference.InferParameter', 'double_param')).toBe(4);
    expect(id('inference.ModelStatistics', 'response_stats')).toBe(9);
    expect(id('inference.CudaSharedMemoryRegisterRequest', 'device_id')).toBe(3);
    expect(id('inference.ModelConfig', 'backend')).toBe(17);
    expect(id('inference.ModelConfig', 'runtime')).toBe(25);
    expect(id('inference.ModelConfig', 'model_metrics')).toBe(26);
    expect(id('inference.ModelOutput', 'label_filename')).toBe(4);
    expect(id('inference.ModelSequenceBatching.Control', 'bool_false_true')).toBe(5);
    expect(id('inference.ModelDynamicBatching', 'priority_queue_policy')).toBe(7);
    expect(id('grpc.health.v1.HealthCheckResponse', 'status')).toBe(1);
    expect(root.lookupEnum('grpc.health.v1.HealthCheckResponse.ServingStatus').values['NOT_SERVING']).toBe(2);
    expect(root.lookupEnum('inference.DataType').values['TYPE_BF16']).toBe(14);
  });

  it('declare fields in upstream order where it differs from number order', () => {
    const root = loadRoot();
    const names = (type: string): string[] => root.lookupType(type).fieldsArray.map((f) => f.name);
    expect(names('inference.ModelConfig').slice(0, 6)).toEqual([
      'name', 'platform', 'backend', 'runtime', 'version_policy', 'max_batch_size',
    ]);
    expect(names('inference.ModelOutput')).toEqual([
      'name', 'data_type', 'dims', 'reshape', 'label_filename', 'is_shape_tensor', 'is_non_linear_format_io',
    ]);
    expect(names('inference.ModelInstanceGroup')).toEqual([
      'name', 'kind', 'count', 'rate_limiter', 'gpus', 'secondary_devices', 'profile', 'passive', 'host_policy',
    ]);
  });

  it('round-trip a ModelInferRequest through the wire format', () => {
    const root = loadRoot();
    const T = root.lookupType('inference.ModelInferRequest');
    const msg = T.fromObject({
      model_name: 'simple',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }],
      parameters: { sequence_id: { uint64_param: 7 } },
      raw_input_contents: [new Uint8Array([1, 0, 0, 0])],
    });
    const back = T.toObject(T.decode(T.encode(msg).finish()), { longs: Number, oneofs: true });
    expect(back['model_name']).toBe('simple');
    expect(back['inputs'][0].shape).toEqual([1, 16]);
    expect(back['parameters'].sequence_id).toMatchObject({ uint64_param: 7, parameter_choice: 'uint64_param' });
  });
});
