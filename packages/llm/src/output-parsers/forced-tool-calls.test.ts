import { fc } from '@switchyard/testing/fuzz';
import { describe, expect, it } from 'vitest';
import { ChatAssembler, openAiUsage, type ChatParsing } from '../openai-response.js';
import type { ProcessedOutput } from '../output-processor.js';
import { NamedFunctionParser, RequiredCallsParser } from './forced-tool-calls.js';
import { collectEvents, type ParserEvent, type StreamParser } from './parser-events.js';

function feed(parser: StreamParser, pieces: readonly string[]): ParserEvent[] {
  const events: ParserEvent[] = [];
  for (const p of pieces) events.push(...parser.push(p));
  events.push(...parser.finish());
  return events;
}

/** `text` cut at the given positions. */
function split(text: string, cuts: readonly number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let from = 0;
  for (const c of at) {
    pieces.push(text.slice(from, c));
    from = c;
  }
  pieces.push(text.slice(from));
  return pieces;
}

const REQUIRED = '[{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}},\n {"parameters":{"tz":"CET"},"name":"get_time"}]';

describe('forced tool choice parsers', () => {
  it('named: one call from the first delta, the output as its arguments (as generated)', () => {
    expect(feed(new NamedFunctionParser('f'), ['', '{"a"', ': 1}'])).toEqual([
      { type: 'tool_call', index: 0, name: 'f' },
      { type: 'tool_args', index: 0, text: '{"a"' },
      { type: 'tool_args', index: 0, text: ': 1}' },
    ]);
    // Even an output with no text holds the call.
    expect(collectEvents(feed(new NamedFunctionParser('f'), []))).toEqual({ content: '', reasoning: '', toolCalls: [{ name: 'f', arguments: '' }] });
  });

  it('required: every element a call, parameters in json.dumps layout, whatever the key order and the split', () => {
    const whole = collectEvents(feed(new RequiredCallsParser(), [REQUIRED]));
    expect(whole).toEqual({
      content: '',
      reasoning: '',
      toolCalls: [
        { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' },
        { name: 'get_time', arguments: '{"tz": "CET"}' },
      ],
    });
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (cuts) => {
        expect(collectEvents(feed(new RequiredCallsParser(), split(REQUIRED, cuts)))).toEqual(whole);
      }),
    );
  });

  it('required: a call cut by max_tokens keeps what was sent; text that breaks the shape ends the reading', () => {
    expect(collectEvents(feed(new RequiredCallsParser(), ['[{"name": "f", "parameters": {"a": [1, ']))).toMatchObject({ toolCalls: [{ name: 'f', arguments: '{"a": [1, ' }] });
    expect(collectEvents(feed(new RequiredCallsParser(), ['[{"parameters": {"a": 1']))).toMatchObject({ toolCalls: [] });
    expect(collectEvents(feed(new RequiredCallsParser(), ['{"name": "f"}', '[]']))).toMatchObject({ toolCalls: [] });
    expect(collectEvents(feed(new RequiredCallsParser(), ['[{"name": "f", "parameters": {}} x {"name": "g", "parameters": {}}]'])).toolCalls).toEqual([{ name: 'f', arguments: '{}' }]);
  });
});

describe('a forced tool choice assembled as vLLM answers it', () => {
  const head = { id: 'chatcmpl-1', created: 5, model: 'tiny' };
  const step = (text: string, finishReason: ProcessedOutput['finishReason'] = null): ProcessedOutput => ({
    text,
    tokens: [{ id: 1, logprob: -1 }],
    finishReason,
    stopReason: null,
    stoppedByString: false,
  });
  let ids = 0;
  const assembler = (forced: 'named' | 'required'): ChatAssembler => {
    const parsing: ChatParsing = {
      parser: forced === 'named' ? new NamedFunctionParser('get_time') : new RequiredCallsParser(),
      toolCallId: () => `chatcmpl-tool-${++ids}`,
      forced,
    };
    return new ChatAssembler({ head, includeUsage: false, logprobs: false, tokenText: () => '' }, parsing);
  };
  const usage = openAiUsage(3, 3, 0);

  it("named: the name in the first delta, the arguments in later ones; content '', finish_reason the engine's", () => {
    ids = 0;
    const a = assembler('named');
    const chunks = [...a.add(step('{"tz"')), ...a.add(step(': "CET"}', 'stop'))];
    expect(chunks.map((c) => [c.choices[0]!.delta, c.choices[0]!.finish_reason])).toEqual([
      [{ role: 'assistant', content: '' }, null],
      [{ tool_calls: [{ index: 0, id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_time', arguments: '' } }] }, null],
      [{ tool_calls: [{ index: 0, function: { arguments: '{"tz"' } }] }, null],
      [{ tool_calls: [{ index: 0, function: { arguments: ': "CET"}' } }] }, 'stop'],
    ]);
    expect(a.response(usage).choices[0]).toEqual({
      index: 0,
      message: { role: 'assistant', content: '', tool_calls: [{ id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_time', arguments: '{"tz": "CET"}' } }] },
      logprobs: null,
      finish_reason: 'stop',
      stop_reason: null,
    });
    const cut = assembler('named');
    cut.add(step('{"tz": "C', 'length'));
    expect(cut.response(usage).choices[0]).toMatchObject({ finish_reason: 'length', message: { content: '', tool_calls: [{ function: { name: 'get_time', arguments: '{"tz": "C' } }] } });
  });

  it("required: each call streamed name first, then its parameters; finish_reason tool_calls (length when cut); content ''", () => {
    ids = 0;
    const a = assembler('required');
    const chunks = [...a.add(step('[{"name": "get_weather", "para')), ...a.add(step('meters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}]', 'stop'))];
    const deltas = chunks.slice(1).map((c) => c.choices[0]!.delta.tool_calls);
    expect(deltas).toEqual([
      [{ index: 0, id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_weather', arguments: '' } }],
      [{ index: 0, function: { arguments: '{"city": "Paris"}' } }],
      [{ index: 1, id: 'chatcmpl-tool-2', type: 'function', function: { name: 'get_time', arguments: '' } }],
      [{ index: 1, function: { arguments: '{}' } }],
    ]);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(a.response(usage).choices[0]).toMatchObject({
      message: { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }, { function: { name: 'get_time', arguments: '{}' } }] },
      finish_reason: 'tool_calls',
    });
    const cut = assembler('required');
    cut.add(step('[{"name": "get_weather", "parameters": {"ci', 'length'));
    expect(cut.response(usage).choices[0]).toMatchObject({ finish_reason: 'length', message: { content: '', tool_calls: [{ function: { name: 'get_weather', arguments: '{"ci' } }] } });
    // Cut before any call was named: no call, no failure.
    const early = assembler('required');
    early.add(step('[{"na', 'length'));
    expect(early.response(usage).choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: '' }, logprobs: null, finish_reason: 'length', stop_reason: null });
    // An output that is no list (no constraint behind it) holds no call and keeps the engine's reason.
    const none = assembler('required');
    none.add(step('no list', 'stop'));
    expect(none.response(usage).choices[0]).toMatchObject({ message: { content: '' }, finish_reason: 'stop' });
  });
});
