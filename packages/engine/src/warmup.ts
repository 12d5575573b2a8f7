/**
 * Model warmup (`model_warmup` in the config): build each warmup sample as an ordinary request
 * and run it `count` times (at least once) on every instance before the version turns READY; the
 * instances run a sample side by side, samples one after another in config order.
 * Samples go straight to the instances, bypassing scheduler and statistics, as in Triton.
 *
 * Data: `zero_data` = zeros (empty strings for BYTES); `random_data` = random values in a
 * small range (zeros for BYTES, as Triton does); `input_data_file` = the raw bytes of
 * `<model folder>/warmup/<file>` (for BYTES the whole file is one element, repeated).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidArgument, resolveConfinedPath, unavailable } from '@switchyard/common';
import { elementByteSize, elementCount, serializeBytesElements, type DataType, type InferTensor } from '@switchyard/kserve';
import { configDataTypeToWire, type ModelConfig, type ModelWarmup, type ModelWarmupInput } from '@switchyard/model-config';
import type { BackendInstance } from './backend.js';
import { normalizeRequest, type NormalizedRequest } from './request-normalizer.js';

export interface WarmupSample {
  name: string;
  count: number;
  request: NormalizedRequest;
}

function randomBytes(datatype: DataType, count: number): Uint8Array {
  const size = elementByteSize(datatype);
  const out = new Uint8Array(count * size);
  const view = new DataView(out.buffer);
  for (let i = 0; i < count; i++) {
    const o = i * size;
    const r = Math.random();
    switch (datatype) {
      case 'BOOL':
        view.setUint8(o, r < 0.5 ? 0 : 1);
        break;
      case 'FP32':
        view.setFloat32(o, r, true);
        break;
      case 'FP64':
        view.setFloat64(o, r, true);
        break;
      case 'FP16':
      case 'BF16':
        // A positive value below 1 in both half formats' bit layouts.
        view.setUint16(o, Math.floor(r * 0x3b00), true);
        break;
      default:
        // Small non-negative integers fit every integer type.
        for (let b = 0; b < size; b++) view.setUint8(o + b, b === 0 ? Math.floor(r * 100) : 0);
    }
  }
  return out;
}

async function sampleData(input: ModelWarmupInput, datatype: DataType, shape: number[], modelPath: string, inputName: string): Promise<Uint8Array> {
  const count = elementCount(shape);
  if (input.input_data_file !== undefined && input.input_data_file !== '') {
    const found = resolveConfinedPath(join(modelPath, 'warmup'), input.input_data_file, `warmup input_data_file '${input.input_data_file}' of input '${inputName}'`, "the model's warmup folder");
    const file = found.path;
    const content = found.exists ? await readFile(file).catch(() => undefined) : undefined;
    if (content === undefined) throw invalidArgument(`failed to read warmup data file '${file}' for input '${inputName}'`);
    if (datatype === 'BYTES') return serializeBytesElements(Array.from({ length: count }, () => content));
    const needed = count * elementByteSize(datatype);
    if (content.byteLength < needed) {
      throw invalidArgument(`warmup data file '${file}' for input '${inputName}' has ${content.byteLength} bytes, expected at least ${needed}`);
    }
    return new Uint8Array(content.buffer, content.byteOffset, needed).slice();
  }
  if (datatype === 'BYTES') return new Uint8Array(count * 4);
  if (input.random_data === true) return randomBytes(datatype, count);
  return new Uint8Array(count * elementByteSize(datatype));
}

async function buildSample(config: ModelConfig, warmup: ModelWarmup, modelPath: string): Promise<WarmupSample> {
  const batch = Math.max(1, warmup.batch_size);
  const inputs: InferTensor[] = [];
  for (const [name, input] of Object.entries(warmup.inputs)) {
    const datatype = configDataTypeToWire(input.data_type);
    const shape = config.max_batch_size > 0 ? [batch, ...input.dims] : [...input.dims];
    inputs.push({ name, datatype, shape, data: await sampleData(input, datatype, shape, modelPath, name), parameters: {} });
  }
  const request = normalizeRequest(config, {
    id: `warmup-${warmup.name}`,
    modelName: config.name,
    modelVersion: undefined,
    parameters: {},
    inputs,
    outputs: [],
  });
  return { name: warmup.name, count: Math.max(1, warmup.count), request };
}

/** Run every warmup sample on every instance. Throws unavailable naming the failed sample. */
export async function runWarmup(config: ModelConfig, modelPath: string, instances: readonly BackendInstance[]): Promise<void> {
  for (const warmup of config.model_warmup) {
    let sample: WarmupSample;
    try {
      sample = await buildSample(config, warmup, modelPath);
    } catch (e) {
      throw unavailable(`failed to warm up model '${config.name}' with sample '${warmup.name}': ${e instanceof Error ? e.message : String(e)}`, e);
    }
    // The instances run the sample side by side (each computes on its own thread, as when they serve);
    // the failure reported is the first instance's in order, as when they ran one after another.
    const failures = await Promise.all(instances.map((instance) => runSample(instance, sample)));
    const failed = failures.findIndex((f) => f !== undefined);
    if (failed >= 0) {
      const e = failures[failed]!.error;
      throw unavailable(
        `failed to warm up model '${config.name}' instance '${instances[failed]!.name}' with sample '${warmup.name}': ${e instanceof Error ? e.message : String(e)}`,
        e,
      );
    }
  }
}

/** Run `sample` `count` times on `instance`, one after another; the first failure, if any. */
async function runSample(instance: BackendInstance, sample: WarmupSample): Promise<{ error: unknown } | undefined> {
  for (let i = 0; i < sample.count; i++) {
    try {
      const outcome = await instance.execute([sample.request]);
      const result = outcome.results[0];
      if (result !== undefined && 'error' in result) throw result.error;
    } catch (e) {
      return { error: e };
    }
  }
  return undefined;
}
