/**
 * Shared-memory, trace and log RPCs. System shared memory goes to the `SharedMemoryManager`
 * shared with the HTTP door; CUDA shared memory answers as a Triton build without GPUs
 * (register refused, status empty, unregister a silent success); trace and log settings go to
 * the shared `ServerSettings`, which validates them with Triton's messages.
 */
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { invalidArgument, notFound } from '@switchyard/common';
import { unary, type GrpcContext } from './grpc-context.js';

interface LogSettingValue {
  parameter_choice?: 'bool_param' | 'uint32_param' | 'string_param';
  bool_param?: boolean;
  uint32_param?: number;
  string_param?: string;
}

/**
 * A log `SettingValue` as the plain value `ServerSettings` validates. A value with no member set
 * becomes an empty object, which fails every type check (Triton refuses it too) and, for
 * `log_file`, still counts as an attempt to set it.
 */
function logSettingValue(v: LogSettingValue): unknown {
  const choice =
    v.parameter_choice ??
    (v.bool_param !== undefined ? 'bool_param' : v.uint32_param !== undefined ? 'uint32_param' : v.string_param !== undefined ? 'string_param' : undefined);
  switch (choice) {
    case 'bool_param':
      return v.bool_param === true;
    case 'uint32_param':
      return v.uint32_param ?? 0;
    case 'string_param':
      return v.string_param ?? '';
    default:
      return {};
  }
}

export function adminHandlers(ctx: GrpcContext): UntypedServiceImplementation {
  const { shm, settings, engine } = ctx;
  return {
    SystemSharedMemoryStatus: unary(ctx, (req: { name: string }) => {
      const regions: Record<string, { name: string; key: string; offset: number; byte_size: number }> = {};
      for (const r of shm.status(req.name === '' ? undefined : req.name)) regions[r.name] = r;
      return { regions };
    }),
    SystemSharedMemoryRegister: unary(ctx, (req: { name: string; key: string; offset: string | number; byte_size: string | number }) => {
      shm.assertEnabled();
      shm.register(req.name, req.key, Number(req.offset), Number(req.byte_size));
      return {};
    }),
    SystemSharedMemoryUnregister: unary(ctx, (req: { name: string }) => {
      shm.assertEnabled();
      shm.unregister(req.name === '' ? undefined : req.name);
      return {};
    }),
    CudaSharedMemoryStatus: unary(ctx, (req: { name: string }) => {
      if (req.name === '') return { regions: {} };
      const isSystemRegion = shm.status().some((r) => r.name === req.name);
      if (isSystemRegion) {
        throw notFound(`The region named '${req.name}' is registered as system shared memory, not CUDA shared memory`);
      }
      throw notFound(`Unable to find cuda shared memory region: '${req.name}'`);
    }),
    CudaSharedMemoryRegister: unary(ctx, (req: { name: string }) => {
      throw invalidArgument(`failed to register CUDA shared memory region: '${req.name}', GPUs not supported`);
    }),
    // No CUDA region can exist, so unregistering one (or all) always succeeds; the Python shm
    // examples call it even on CPU-only servers.
    CudaSharedMemoryUnregister: unary(ctx, () => ({})),
    TraceSetting: unary(ctx, (req: { settings: Record<string, { value?: string[] }>; model_name: string }) => {
      const model = req.model_name === '' ? undefined : req.model_name;
      if (model !== undefined && !engine.isModelReady(model)) throw invalidArgument(`Request for unknown model : ${model}`);
      const entries = Object.entries(req.settings ?? {});
      if (entries.length > 0) {
        const patch: Record<string, string[]> = {};
        // An empty list clears a setting; ServerSettings reads lists for every key.
        for (const [key, v] of entries) patch[key] = [...(v.value ?? [])];
        settings.updateTraceSettings(model, patch);
      }
      const out: Record<string, { value: string[] }> = {};
      for (const [key, v] of Object.entries(settings.traceSettings(model))) out[key] = { value: Array.isArray(v) ? v : [v] };
      return { settings: out };
    }),
    LogSettings: unary(ctx, (req: { settings: Record<string, LogSettingValue> }) => {
      const entries = Object.entries(req.settings ?? {});
      if (entries.length > 0) {
        const patch: Record<string, unknown> = {};
        for (const [key, v] of entries) patch[key] = logSettingValue(v);
        settings.updateLogSettings(patch);
      }
      const s = settings.logSettings();
      return {
        settings: {
          log_file: { string_param: s.log_file },
          log_info: { bool_param: s.log_info },
          log_warning: { bool_param: s.log_warning },
          log_error: { bool_param: s.log_error },
          log_verbose_level: { uint32_param: s.log_verbose_level },
          log_format: { string_param: s.log_format },
        },
      };
    }),
  };
}
