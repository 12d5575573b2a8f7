/**
 * The protobufjs reflection of our `proto/onnx-mini.proto`, loaded once on first use.
 * Field names are kept in snake_case, exactly as in onnx.proto.
 */
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/** Directory holding `onnx-mini.proto`; the same relative path from `src/` and `dist/`. */
export const PROTO_DIR = new URL('../proto/', import.meta.url);

let modelType: protobuf.Type | undefined;

/** The `onnx.ModelProto` message type. */
export function modelProtoType(): protobuf.Type {
  if (!modelType) {
    const root = new protobuf.Root().loadSync(fileURLToPath(new URL('onnx-mini.proto', PROTO_DIR)), {
      keepCase: true,
    });
    modelType = root.lookupType('onnx.ModelProto');
  }
  return modelType;
}

/**
 * Serialise a plain ModelProto object (snake_case fields). Verifies it against the schema first so
 * that a misspelt field is a bug we see, not a silently dropped value.
 */
export function encodeModelProto(model: Record<string, unknown>): Uint8Array {
  const type = modelProtoType();
  const problem = type.verify(model);
  if (problem) throw new Error(`invalid ModelProto: ${problem}`);
  return type.encode(type.fromObject(model)).finish();
}

/** Parse ONNX bytes back into a plain object (int64 as numbers, bytes as Uint8Array); for tests and tools. */
export function decodeModelProto(bytes: Uint8Array): Record<string, unknown> {
  const type = modelProtoType();
  return type.toObject(type.decode(bytes), { longs: Number, enums: String, defaults: false }) as Record<
    string,
    unknown
  >;
}
