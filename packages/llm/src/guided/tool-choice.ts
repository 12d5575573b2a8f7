/**
 * A forced tool choice as a JSON schema for guided decoding, built as vLLM builds it (protocol.py
 * `_get_json_schema_from_tool`, tool_parsers/utils.py `get_json_schema_from_tools`). Pure: the caller
 * compiles the schema (`json-schema.ts`) and names refusals.
 *
 * - A named function (`tool_choice: {type: "function", function: {name}}`): the output is that
 *   function's arguments, so the schema is its `parameters` as sent.
 * - `"required"`: the output is a JSON array of at least one call, each `{"name": <one of the tools'
 *   names>, "parameters": <that tool's parameters>}`.
 * - `"auto"` / `"none"`: nothing (null); the model writes freely.
 *
 * Where this differs from vLLM's text, and why:
 * - A function without `parameters` gets `{"type": "object", "properties": {}}` for a named choice too
 *   (vLLM's required branch does so; its named branch leaves the output unconstrained, so the reply's
 *   `arguments` could be any text).
 * - vLLM writes each item as `{"type": "object", "anyOf": [...]}`; the compiler here takes anyOf only
 *   alone, so `type: "object"` moves into each alternative (the same set of values). Each alternative
 *   admits no other keys than `name` and `parameters` (`additionalProperties: false`): vLLM's default
 *   backend, xgrammar, compiles schemas in strict mode, which does the same.
 * - `$defs` of every tool move to the root (vLLM's `_get_tool_schema_defs`, with its refusal of one
 *   name defined twice differently); `definitions` too, which local `$ref`s may also point into.
 */
import { invalidArgument } from '@switchyard/common';

/** What this module reads of a request's tool (OpenAI's `tools[]` entry). */
export interface ToolDefinition {
  readonly function: { readonly name: string; readonly parameters?: Record<string, unknown> | undefined };
}

/** A validated `tool_choice` (a named function as `{ name }`). */
export type ForcedToolChoice = 'none' | 'auto' | 'required' | { readonly name: string };

/** The schema of a function without declared parameters. */
export const EMPTY_PARAMETERS: Readonly<Record<string, unknown>> = Object.freeze({ type: 'object', properties: {} });

/** The keys under which a schema's local `$ref`s find their definitions. */
const DEFINITION_KEYS = ['$defs', 'definitions'] as const;

/** A tool's parameters schema (or the empty object schema when it declares none). */
export function toolParameters(tool: ToolDefinition): Record<string, unknown> {
  return tool.function.parameters ?? { ...EMPTY_PARAMETERS };
}

/**
 * The JSON schema the output must follow under `choice`, or null when the choice forces nothing.
 * A named function must be one of `tools` (the request's decode edge checks it). invalid_argument
 * when two tools define one `$defs` name differently (vLLM's message).
 */
export function toolChoiceSchema(tools: readonly ToolDefinition[] | undefined, choice: ForcedToolChoice): Record<string, unknown> | null {
  if (tools === undefined || tools.length === 0 || choice === 'none' || choice === 'auto') return null;
  if (choice !== 'required') {
    const tool = tools.find((t) => t.function.name === choice.name);
    if (tool === undefined) throw invalidArgument(`Tool '${choice.name}' has not been passed in \`tools\`.`);
    return toolParameters(tool);
  }
  // Maps: a definition may be named `__proto__`.
  const defs = { $defs: new Map<string, unknown>(), definitions: new Map<string, unknown>() };
  const alternatives = tools.map((tool) => {
    const params: Record<string, unknown> = { ...toolParameters(tool) };
    for (const key of DEFINITION_KEYS) {
      const own = params[key];
      if (own === undefined) continue;
      delete params[key];
      if (typeof own !== 'object' || own === null || Array.isArray(own)) continue; // the compiler refuses a bad $ref later
      for (const [name, schema] of Object.entries(own as Record<string, unknown>)) {
        const known = defs[key];
        if (known.has(name) && JSON.stringify(known.get(name)) !== JSON.stringify(schema)) {
          throw invalidArgument(`Tool definition '${name}' has multiple schemas, which is not supported.`);
        }
        known.set(name, schema);
      }
    }
    return {
      type: 'object',
      properties: { name: { type: 'string', enum: [tool.function.name] }, parameters: params },
      required: ['name', 'parameters'],
      additionalProperties: false,
    };
  });
  const schema: Record<string, unknown> = { type: 'array', minItems: 1, items: { anyOf: alternatives } };
  for (const key of DEFINITION_KEYS) if (defs[key].size > 0) schema[key] = Object.fromEntries(defs[key]);
  return schema;
}
