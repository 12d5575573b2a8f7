/**
 * Test helper: build a model repository in a temp folder, and small request/tensor helpers.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bytesOf, serializeBytesElements, type DataType, type InferRequest, type InferTensor } from '@switchyard/kserve';

export interface ModelFixture {
  /** config.pbtxt contents; omitted = no config file. */
  config?: string;
  /** version → file name → contents. */
  versions?: Record<number | string, Record<string, Uint8Array | string>>;
  /** Extra files relative to the model folder (e.g. `warmup/data.bin`). */
  files?: Record<string, Uint8Array | string>;
}

export interface RepositoryFixture {
  root: string;
  addModel(name: string, model: ModelFixture): Promise<string>;
  remove(name: string): Promise<void>;
  cleanup(): Promise<void>;
}

async function writeAll(base: string, files: Record<string, Uint8Array | string>): Promise<void> {
  for (const [rel, data] of Object.entries(files)) {
    const path = join(base, rel);
    await mkdir(join(path, '..'), { recursive: true });
    await writeFile(path, data);
  }
}

export async function createRepository(models: Record<string, ModelFixture> = {}): Promise<RepositoryFixture> {
  const root = await mkdtemp(join(tmpdir(), 'switchyard-engine-test-'));
  const fixture: RepositoryFixture = {
    root,
    async addModel(name, model) {
      const dir = join(root, name);
      await mkdir(dir, { recursive: true });
      if (model.config !== undefined) await writeFile(join(dir, 'config.pbtxt'), model.config);
      for (const [version, files] of Object.entries(model.versions ?? {})) {
        await mkdir(join(dir, String(version)), { recursive: true });
        await writeAll(join(dir, String(version)), files);
      }
      await writeAll(dir, model.files ?? {});
      return dir;
    },
    async remove(name) {
      await rm(join(root, name), { recursive: true, force: true });
    },
    async cleanup() {
      await rm(root, { recursive: true, force: true });
    },
  };
  for (const [name, model] of Object.entries(models)) await fixture.addModel(name, model);
  return fixture;
}

export function tensor(name: string, datatype: DataType, shape: number[], data: ArrayBufferView | Uint8Array): InferTensor {
  return { name, datatype, shape, data: data instanceof Uint8Array ? data : bytesOf(data), parameters: {} };
}

export function bytesTensor(name: string, shape: number[], values: string[]): InferTensor {
  return tensor(name, 'BYTES', shape, serializeBytesElements(values.map((v) => new TextEncoder().encode(v))));
}

export function request(modelName: string, inputs: InferTensor[], extra: Partial<InferRequest> = {}): InferRequest {
  return { id: '', modelName, modelVersion: undefined, parameters: {}, inputs, outputs: [], ...extra };
}

export function int32s(data: Uint8Array): number[] {
  return Array.from(new Int32Array(data.slice().buffer));
}

export function float32s(data: Uint8Array): number[] {
  return Array.from(new Float32Array(data.slice().buffer));
}

/** The Triton `simple` model's config. */
export const SIMPLE_CONFIG = `
name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
`;
