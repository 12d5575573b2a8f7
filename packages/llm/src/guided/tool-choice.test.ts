import { describe, expect, it } from 'vitest';
import { validates } from '@switchyard/testing/fuzz';
import { errorParam, parseChatCompletionRequest } from '../openai-protocol.js';
import { initialState, isAccepting, step, type JsonState } from './json-automaton.js';
import { compileJsonSchema } from './json-schema.js';
import { toolChoiceSchema } from './tool-choice.js';

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { $ref: '#/$defs/unit' } }, required: ['city'], $defs: { unit: { enum: ['C', 'F'] } } },
  },
} as const;
const TIME = { type: 'function', function: { name: 'get_time' } } as const;
const tools = [WEATHER, TIME];

/** Whether the automaton of `schema` takes `text` whole (complete and accepting). */
function accepts(schema: unknown, text: string): boolean {
  let state: JsonState | null = initialState(compileJsonSchema(schema));
  for (const b of Buffer.from(text)) {
    state = step(state, b);
    if (state === null) return false;
  }
  return isAccepting(state);
}

describe('toolChoiceSchema (vLLM get_json_schema_from_tools)', () => {
  it('auto and none force nothing; a named function is its parameters, the empty object schema when it has none', () => {
    expect(toolChoiceSchema(tools, 'auto')).toBeNull();
    expect(toolChoiceSchema(tools, 'none')).toBeNull();
    expect(toolChoiceSchema(undefined, 'required')).toBeNull();
    expect(toolChoiceSchema(tools, { name: 'get_weather' })).toEqual(WEATHER.function.parameters);
    expect(toolChoiceSchema(tools, { name: 'get_time' })).toEqual({ type: 'object', properties: {} });
    expect(() => toolChoiceSchema(tools, { name: 'nope' })).toThrow("Tool 'nope' has not been passed in `tools`.");
  });

  it('required: an array of at least one {name, parameters} per tool, $defs moved to the root', () => {
    const schema = toolChoiceSchema(tools, 'required');
    expect(schema).toEqual({
      type: 'array',
      minItems: 1,
      items: {
        anyOf: [
          {
            type: 'object',
            properties: { name: { type: 'string', enum: ['get_weather'] }, parameters: { type: 'object', properties: WEATHER.function.parameters.properties, required: ['city'] } },
            required: ['name', 'parameters'],
            additionalProperties: false,
          },
          {
            type: 'object',
            properties: { name: { type: 'string', enum: ['get_time'] }, parameters: { type: 'object', properties: {} } },
            required: ['name', 'parameters'],
            additionalProperties: false,
          },
        ],
      },
      $defs: { unit: { enum: ['C', 'F'] } },
    });
    // The request's own tool is left as sent.
    expect(WEATHER.function.parameters.$defs).toBeDefined();
    // What the automaton lets through is what the schema validates.
    const good = '[{"name": "get_weather", "parameters": {"city": "Paris", "unit": "C"}}, {"parameters": {}, "name": "get_time"}]';
    expect(accepts(schema, good)).toBe(true);
    expect(validates(JSON.parse(good), schema)).toBe(true);
    for (const bad of [
      '[]',
      '[{"name": "get_weather", "parameters": {}}]', // city is required
      '[{"name": "get_time", "parameters": {}, "x": 1}]', // no other keys
      '[{"name": "other", "parameters": {}}]',
      '{"name": "get_time", "parameters": {}}',
    ]) {
      expect(accepts(schema, bad), bad).toBe(false);
      expect(validates(JSON.parse(bad), schema), bad).toBe(false);
    }
    // A $ref into the hoisted $defs (the test's validator does not follow $refs).
    expect(accepts(schema, '[{"name": "get_weather", "parameters": {"city": "Paris", "unit": "K"}}]')).toBe(false);
  });

  it("refuses one $defs name defined differently by two tools (vLLM's message); the same definition twice is fine", () => {
    const other = { type: 'function', function: { name: 'other', parameters: { type: 'object', properties: { u: { $ref: '#/$defs/unit' } }, $defs: { unit: { type: 'string' } } } } };
    expect(() => toolChoiceSchema([WEATHER, other], 'required')).toThrow("Tool definition 'unit' has multiple schemas, which is not supported.");
    const same = { ...other, function: { ...other.function, parameters: { ...other.function.parameters, $defs: WEATHER.function.parameters.$defs } } };
    expect(compileJsonSchema(toolChoiceSchema([WEATHER, same], 'required'))).toBeDefined();
  });
});

describe('a forced tool choice on the decode edge', () => {
  const request = (body: object) => parseChatCompletionRequest({ messages: [{ role: 'user', content: 'hi' }], tools, ...body });
  const refusal = (body: object): string => {
    try {
      request(body);
    } catch (e) {
      return `${errorParam(e)}: ${(e as Error).message}`;
    }
    return 'accepted';
  };

  it('required and named put their schema into the sampling as guided decoding, over response_format; auto and none do not', () => {
    expect(request({ tool_choice: 'required' }).sampling.guided_decoding).toEqual({ kind: 'json_schema', schema: toolChoiceSchema(tools, 'required') });
    const named = request({ tool_choice: { type: 'function', function: { name: 'get_weather' } }, response_format: { type: 'json_object' } });
    expect(named.sampling.guided_decoding).toEqual({ kind: 'json_schema', schema: WEATHER.function.parameters });
    expect(named.samplingFields.guided_decoding).toEqual(named.sampling.guided_decoding);
    expect(request({ tool_choice: 'auto' }).sampling.guided_decoding).toBeNull();
    expect(request({ tool_choice: 'none', response_format: { type: 'json_object' } }).sampling.guided_decoding).toEqual({ kind: 'json' });
  });

  it("refuses a schema feature the automaton lacks with a 400 naming the tool's parameters, only for tools the choice can call", () => {
    const patterned = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } } } };
    const body = { tools: [WEATHER, patterned] };
    expect(refusal({ ...body, tool_choice: 'required' })).toBe('tools[1].function.parameters: tools[1].function.parameters: pattern is not supported (at #/properties/id)');
    expect(refusal({ ...body, tool_choice: { type: 'function', function: { name: 'lookup' } } })).toContain('pattern is not supported');
    // Not forced: the template gets the tool as sent.
    expect(refusal({ ...body, tool_choice: { type: 'function', function: { name: 'get_weather' } } })).toBe('accepted');
    expect(refusal({ ...body, tool_choice: 'auto' })).toBe('accepted');
    // Bounds only the whole list can break: param tool_choice.
    const many = Array.from({ length: 65 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } }));
    expect(refusal({ tools: many, tool_choice: 'required' })).toMatch(/^tool_choice: the schema of tool_choice 'required': anyOf\/oneOf\/type lists may keep at most 64/);
    expect(refusal({ tool_choice: 'required', ignore_eos: true })).toMatch(/^tool_choice: ignore_eos cannot be combined with guided decoding/);
  });
});
