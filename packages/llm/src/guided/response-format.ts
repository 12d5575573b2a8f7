/**
 * OpenAI's `response_format` → a `GuidedDecoding` spec: `{type: "text"}` (none), `{type:
 * "json_object"}` (any JSON object), `{type: "json_schema", json_schema: {name, schema, strict,
 * description}}` (the schema's subset, `json-schema.ts`). Refusals are invalid_argument; the OpenAI
 * door names `response_format` as their param.
 */
import { describeValue, invalidArgument } from '@switchyard/common';
import { decodeGuidedDecoding, type GuidedDecoding } from './json-schema.js';

/** OpenAI's rule for `json_schema.name`. */
const SCHEMA_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export function parseResponseFormat(value: unknown): GuidedDecoding | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) throw invalidArgument(`response_format must be an object, got ${describeValue(value)}`);
  const o = value as Record<string, unknown>;
  switch (o['type']) {
    case 'text':
      return null;
    case 'json_object':
      return { kind: 'json' };
    case 'json_schema': {
      const js = o['json_schema'];
      if (typeof js !== 'object' || js === null || Array.isArray(js)) throw invalidArgument('response_format.json_schema must be an object with name and schema');
      const j = js as Record<string, unknown>;
      if (typeof j['name'] !== 'string' || !SCHEMA_NAME.test(j['name'])) {
        throw invalidArgument('response_format.json_schema.name must be 1 to 64 letters, digits, underscores or dashes');
      }
      if (j['strict'] !== undefined && j['strict'] !== null && typeof j['strict'] !== 'boolean') throw invalidArgument('response_format.json_schema.strict must be a boolean');
      if (j['schema'] === undefined || j['schema'] === null) throw invalidArgument('response_format.json_schema.schema is required');
      return decodeGuidedDecoding({ kind: 'json_schema', schema: j['schema'] }, 'response_format.json_schema');
    }
    default:
      throw invalidArgument(`response_format.type must be "text", "json_object" or "json_schema", got ${describeValue(o['type'])}`);
  }
}
