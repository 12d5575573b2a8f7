import { fc } from '@switchyard/testing/fuzz';
import { describe, expect, it } from 'vitest';
import { chatOutputParser } from './chat-output-parser.js';
import { collectEvents, type ParserEvent, type StreamParser } from './parser-events.js';
import { parsePythonCalls } from './python-calls.js';

type Options = { toolCallParser?: string; reasoningParser?: string };

function feed(parser: StreamParser, pieces: readonly string[]): ParserEvent[] {
  const events: ParserEvent[] = [];
  for (const p of pieces) events.push(...parser.push(p));
  events.push(...parser.finish());
  return events;
}
const whole = (options: Options, text: string) => collectEvents(feed(chatOutputParser(options), [text]));

/** `text` cut at the given positions. */
function split(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const c of at) {
    out.push(text.slice(from, c));
    from = c;
  }
  out.push(text.slice(from));
  return out;
}

const MARKERS = ['<tool_call>', '</tool_call>', '<think>', '</think>', '[TOOL_CALLS]', '<|python_tag|>'];

describe('tool-call parsers, whole outputs (vLLM results)', () => {
  it('hermes: content before the first call, every call, arguments in json.dumps layout', () => {
    const out = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris","days":[1,2]}}\n</tool_call>\n<tool_call>\n{"arguments": {}, "name": "now"}\n</tool_call>';
    expect(whole({ toolCallParser: 'hermes' }, out)).toEqual({
      content: 'Let me check.\n',
      reasoning: '',
      toolCalls: [
        { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' },
        { name: 'now', arguments: '{}' },
      ],
    });
    expect(whole({ toolCallParser: 'hermes' }, 'no calls here')).toEqual({ content: 'no calls here', reasoning: '', toolCalls: [] });
    // Not a call object: the text stays content, markers included.
    expect(whole({ toolCallParser: 'hermes' }, 'a <tool_call>oops</tool_call> b').content).toBe('a <tool_call>oops</tool_call> b');
    // An unterminated call at the end of the output still counts (vLLM's regex takes it).
    expect(whole({ toolCallParser: 'hermes' }, '<tool_call>{"name": "f", "arguments": {"a": "x y"}}').toolCalls).toEqual([{ name: 'f', arguments: '{"a": "x y"}' }]);
  });

  it('llama3_json: JSON objects from the start, parameters or arguments, separated by ;', () => {
    const out = '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {"y": "}"}}';
    expect(whole({ toolCallParser: 'llama3_json' }, out)).toEqual({
      content: '',
      reasoning: '',
      toolCalls: [
        { name: 'a', arguments: '{"x": 1}' },
        { name: 'b', arguments: '{"y": "}"}' },
      ],
    });
    expect(whole({ toolCallParser: 'llama3_json' }, ' {"name": "a", "parameters": {}}').toolCalls).toEqual([{ name: 'a', arguments: '{}' }]);
    expect(whole({ toolCallParser: 'llama3_json' }, 'Hello {"name": "a"}')).toEqual({ content: 'Hello {"name": "a"}', reasoning: '', toolCalls: [] });
    expect(whole({ toolCallParser: 'llama3_json' }, '{not json}').content).toBe('{not json}');
  });

  it('mistral: [TOOL_CALLS] then a JSON list; content before the marker', () => {
    const out = 'Sure. [TOOL_CALLS] [{"name": "a", "arguments": {"q": "x"}}, {"name": "b", "arguments": {"n": -1.5e3}}]';
    expect(whole({ toolCallParser: 'mistral' }, out)).toEqual({
      content: 'Sure. ',
      reasoning: '',
      toolCalls: [
        { name: 'a', arguments: '{"q": "x"}' },
        { name: 'b', arguments: '{"n": -1.5e3}' },
      ],
    });
  });

  it('mistral v11 and later: [TOOL_CALLS]name{...} and [TOOL_CALLS]name[ARGS]{...}, one marker per call', () => {
    expect(whole({ toolCallParser: 'mistral' }, 'Ok.[TOOL_CALLS]get_weather{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz":"CET"}')).toEqual({
      content: 'Ok.',
      reasoning: '',
      toolCalls: [
        { name: 'get_weather', arguments: '{"city": "Paris"}' },
        { name: 'get_time', arguments: '{"tz": "CET"}' },
      ],
    });
    expect(whole({ toolCallParser: 'mistral' }, '[TOOL_CALLS]not a name{"a": 1}').toolCalls).toEqual([]);
  });

  it('pythonic: a list of calls with literal keyword arguments', () => {
    expect(whole({ toolCallParser: 'pythonic' }, '[get_weather(city="Paris", units=\'c\'), search(q=["a", (1, 2)], opts={"k": None, 1: True}, x=.5)]')).toEqual({
      content: '',
      reasoning: '',
      toolCalls: [
        { name: 'get_weather', arguments: '{"city": "Paris", "units": "c"}' },
        { name: 'search', arguments: '{"q": ["a", [1, 2]], "opts": {"k": null, "1": true}, "x": 0.5}' },
      ],
    });
    expect(whole({ toolCallParser: 'pythonic' }, '[1, 2] are numbers').content).toBe('[1, 2] are numbers');
    expect(whole({ toolCallParser: 'pythonic' }, 'Hi [f()]').content).toBe('Hi [f()]');
    expect(parsePythonCalls('[f(a=1+2)]')).toBeUndefined();
    expect(parsePythonCalls('[f(' + 'a=' + '['.repeat(100_000) + ')]')).toBeUndefined();
  });
});

describe('reasoning parsers', () => {
  it('deepseek_r1: reasoning up to </think>, all reasoning without it', () => {
    expect(whole({ reasoningParser: 'deepseek_r1' }, 'hmm\n</think>\n\nAnswer')).toEqual({ content: '\n\nAnswer', reasoning: 'hmm\n', toolCalls: [] });
    expect(whole({ reasoningParser: 'deepseek_r1' }, '<think>a</think>b')).toEqual({ content: 'b', reasoning: 'a', toolCalls: [] });
    expect(whole({ reasoningParser: 'deepseek_r1' }, 'still thinking')).toEqual({ content: '', reasoning: 'still thinking', toolCalls: [] });
  });

  it('qwen3: a leading <think>, or the prompt opening it, reasons until </think>; tool calls only in the content', () => {
    const out = '<think>\nI should call it.\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>';
    expect(whole({ reasoningParser: 'qwen3', toolCallParser: 'hermes' }, out)).toEqual({
      content: '\n\n',
      reasoning: '\nI should call it.\n',
      toolCalls: [{ name: 'f', arguments: '{"a": 1}' }],
    });
    // Qwen3.5: the template opened <think> in the prompt
    expect(whole({ reasoningParser: 'qwen3' }, 'plan\n</think>\n\nanswer')).toEqual({ content: '\n\nanswer', reasoning: 'plan\n', toolCalls: [] });
  });

  it('thinking off (the prompt closed </think>, or enable_thinking false for qwen3): content, unless the output opens <think>', () => {
    const closed = '<|im_start|>assistant\n<think>\n\n</think>\n\n';
    const parse = (parser: string, text: string, context: Parameters<typeof chatOutputParser>[1]) => collectEvents(feed(chatOutputParser({ reasoningParser: parser }, context), [text]));
    expect(parse('qwen3', 'plain </think> answer', { promptText: closed })).toEqual({ content: 'plain </think> answer', reasoning: '', toolCalls: [] });
    expect(parse('deepseek_r1', 'plain answer', { promptText: closed })).toEqual({ content: 'plain answer', reasoning: '', toolCalls: [] });
    expect(parse('qwen3', 'plain answer', { promptText: '<|im_start|>assistant\n', templateKwargs: { enable_thinking: false } })).toEqual({ content: 'plain answer', reasoning: '', toolCalls: [] });
    expect(parse('qwen3', '<think>again</think>x', { promptText: closed })).toEqual({ content: 'x', reasoning: 'again', toolCalls: [] });
    // a prompt whose last marker opens <think> (history turns closed theirs)
    expect(parse('qwen3', 'r</think>c', { promptText: '<think>a</think>b<|im_start|>assistant\n<think>\n' })).toEqual({ content: 'c', reasoning: 'r', toolCalls: [] });
  });
});

describe('streaming: any split into deltas gives the whole output’s result, and no marker piece leaks', () => {
  const samples: Array<[Options, string]> = [
    [{ toolCallParser: 'hermes' }, 'Let me see <b>.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris \\"x\\"", "n": [1, {"a": null}]}}\n</tool_call>\n<tool_call>{"name":"b","arguments":{}}</tool_call>'],
    [{ toolCallParser: 'hermes' }, 'a <tool_call>oops</tool_call> b <tool_'],
    [{ toolCallParser: 'llama3_json' }, '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {"y": 2}}'],
    [{ toolCallParser: 'llama3_json' }, '<|python_ta'],
    [{ toolCallParser: 'mistral' }, 'Sure [TOOL_CALLS] [{"name": "a", "arguments": {"q": "x"}}, {"name": "b", "arguments": {"n": 2}}]'],
    [{ toolCallParser: 'mistral' }, 'Sure [TOOL_CALLS]a{"q": "x}"}[TOOL_CALLS]b[ARGS]{"n": [2, {}]}'],
    [{ toolCallParser: 'pythonic' }, '[get_weather(city="Paris"), now()]'],
    [{ reasoningParser: 'deepseek_r1', toolCallParser: 'hermes' }, '<think>x</thin</think>ok<tool_call>{"name": "f", "arguments": {"a": "<think>"}}</tool_call>'],
    [{ reasoningParser: 'qwen3' }, '  <think>reason</think>answer'],
    [{ reasoningParser: 'qwen3' }, '  plan</think>answer'],
  ];
  for (const [options, text] of samples) {
    it(`${JSON.stringify(options)} ${JSON.stringify(text.slice(0, 40))}`, () => {
      const expected = whole(options, text);
      fc.assert(
        fc.property(fc.array(fc.nat(text.length), { maxLength: 12 }), (cuts) => {
          const events = feed(chatOutputParser(options), split(text, cuts));
          expect(collectEvents(events)).toEqual(expected);
          // A tool call's name comes before its argument pieces; no content piece is a marker's prefix alone.
          const started = new Set<number>();
          for (const e of events) {
            if (e.type === 'tool_call') started.add(e.index);
            if (e.type === 'tool_args') expect(started.has(e.index)).toBe(true);
          }
        }),
        { numRuns: 300 },
      );
    });
  }

  it('random texts built from markers and JSON pieces: split and whole agree for every parser', () => {
    const piece = fc.constantFrom(...MARKERS, '{"name": "f", "arguments": {"a": [1, "}"]}}', 'g[ARGS]', 'h', '{"name": 1}', ' ', '\n', 'text', '[f(a=1)]', ';', ',', ']', '[', '"', '{', '}');
    const parsers: Options[] = [
      { toolCallParser: 'hermes' },
      { toolCallParser: 'llama3_json' },
      { toolCallParser: 'mistral' },
      { toolCallParser: 'pythonic' },
      { reasoningParser: 'deepseek_r1', toolCallParser: 'hermes' },
      { reasoningParser: 'qwen3', toolCallParser: 'mistral' },
    ];
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), fc.array(fc.nat(400), { maxLength: 10 }), fc.constantFrom(...parsers), (pieces, cuts, options) => {
        const text = pieces.join('');
        const parts = split(text, cuts);
        const events = feed(chatOutputParser(options), parts);
        expect(collectEvents(events)).toEqual(whole(options, text));
        // Held text is never lost: without tool calls, content + reasoning keep every character but markers.
        if (!options.toolCallParser && collectEvents(events).toolCalls.length === 0) {
          const all = collectEvents(events);
          expect((all.reasoning + all.content).length).toBeLessThanOrEqual(text.length);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('long outputs one character at a time cost linear time (held whitespace, held calls, long arguments)', () => {
    const n = 200_000;
    const started = performance.now();
    for (const [options, head, tail] of [
      [{ reasoningParser: 'qwen3' }, '', '<think>x</think>y'],
      [{ toolCallParser: 'llama3_json' }, '', '{"name": "f", "arguments": {"a": 1}}'],
      [{ toolCallParser: 'pythonic' }, '', '[f(a=1)]'],
      [{ toolCallParser: 'hermes' }, '<tool_call>{"name": "f", "arguments": {"a": "', '"}}</tool_call>'],
      [{ reasoningParser: 'deepseek_r1', toolCallParser: 'mistral' }, '', '</think>[TOOL_CALLS][]'],
    ] as Array<[Options, string, string]>) {
      const parser = chatOutputParser(options);
      const events: ParserEvent[] = [...parser.push(head)];
      for (let i = 0; i < n; i++) events.push(...parser.push(' '));
      events.push(...parser.push(tail), ...parser.finish());
      expect(collectEvents(events)).toEqual(whole(options, head + ' '.repeat(n) + tail));
    }
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('unknown parser names are refused with the known ones listed', () => {
    expect(() => chatOutputParser({ toolCallParser: 'nope' })).toThrow(/unknown tool call parser 'nope' \(known: hermes, llama3_json, mistral, pythonic\)/);
    expect(() => chatOutputParser({ reasoningParser: 'r2' })).toThrow(/known: deepseek_r1, qwen3/);
  });
});
