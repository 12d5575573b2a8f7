import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { ChatTemplate, type ChatMessage } from './chat-template.js';
import { DEFAULT_PREPROCESS_IDLE_INLINE_CHARS, PreprocessPool, compilePreprocessPoolOptions, configureSharedPreprocessPool, sharedPreprocessPool, textSize, type ChatPromptJob } from './preprocess-pool.js';
import { Tokenizer } from './tokenizer/tokenizer.js';
import type { TokenizerJson } from './tokenizer/tokenizer-files.js';

const files = buildTinyTokenizerFiles();
const tokenizerJson = JSON.parse(files['tokenizer.json']) as TokenizerJson;
const config = JSON.parse(files['tokenizer_config.json']);
const tokenizer = Tokenizer.fromJson(tokenizerJson, config, JSON.parse(files['config.json']));
const chatml = ChatTemplate.fromTokenizerConfig(config)!;
/** Iterates over content parts (contentFormat 'openai'), renders tools, reads a kwarg, raises on a bad role. */
const partsAndTools = new ChatTemplate(
  [
    '{{ bos_token }}{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}',
    '{% for m in messages %}{% if m.role == "bad" %}{{ raise_exception("roles must be user, assistant or system") }}{% endif %}',
    '<|im_start|>{{ m.role }}\n{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endif %}<|im_end|>\n{% endfor %}',
    '{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is false %}<think></think>{% endif %}{% endif %}',
  ].join(''),
  { bos_token: '<|im_start|>' },
);

const inline = new PreprocessPool({ threads: 0 });
const pooled = new PreprocessPool({ threads: 2, inlineChars: 0 });
afterAll(() => pooled.close());

const long = Array.from({ length: 3000 }, (_, i) => ['alpha ', 'é ', '<|im_start|>', '日本 ', '\n', '👋'][i % 6]).join('');
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const messages: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second <|im_end|> part' }] },
  { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
  { role: 'tool', content: 'sunny', tool_call_id: 'call_1' },
  { role: 'user', content: long },
];

async function settle<T>(p: Promise<T>): Promise<{ ok: T } | { code: string; message: string }> {
  try {
    return { ok: await p };
  } catch (e) {
    return { code: isSwitchyardError(e) ? e.code : 'not a SwitchyardError', message: (e as Error).message };
  }
}

describe('PreprocessPool gives the event loop\'s answers', () => {
  const job = (over: Partial<ChatPromptJob>): ChatPromptJob => ({ messages, addSpecialTokens: false, contextLength: 1 << 20, ...over });
  const cases: Array<[string, ChatTemplate, ChatPromptJob]> = [
    ['ChatML, content parts joined, special tokens in the text', chatml, job({})],
    ['ChatML with the post processor', chatml, job({ addSpecialTokens: true })],
    ['a template over content parts, with tools and a kwarg', partsAndTools, job({ tools, templateKwargs: { enable_thinking: false } })],
    ['a kwarg cannot override messages', partsAndTools, job({ templateKwargs: { messages: [], add_generation_prompt: false } })],
    ['short', chatml, job({ messages: [{ role: 'user', content: 'hi' }] })],
  ];
  for (const [name, template, j] of cases) {
    it(`same text and ids: ${name}`, async () => {
      const here = await inline.chatPrompt(tokenizer, template, j);
      const there = await pooled.chatPrompt(tokenizer, template, j);
      expect(there).toEqual(here);
      expect(here.ids).toEqual(tokenizer.encode(here.text, { addSpecialTokens: j.addSpecialTokens }));
      expect(here.text.endsWith('<|im_start|>assistant\n') || here.text.endsWith('<think></think>')).toBe(true);
    });
  }

  it('same errors: a template that raises, a prompt whose length proves it cannot fit', async () => {
    const bad = job({ messages: [{ role: 'bad', content: 'x' }] });
    const raised = await settle(inline.chatPrompt(tokenizer, partsAndTools, bad));
    expect(raised).toEqual({ code: 'invalid_argument', message: 'chat template: roles must be user, assistant or system' });
    expect(await settle(pooled.chatPrompt(tokenizer, partsAndTools, bad))).toEqual(raised);
    const tooLong = job({ contextLength: 64 });
    const refused = await settle(inline.chatPrompt(tokenizer, chatml, tooLong));
    expect(refused).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/maximum context length is 64 tokens\. However, your request has at least \d+ input tokens/) });
    expect(await settle(pooled.chatPrompt(tokenizer, chatml, tooLong))).toEqual(refused);
  });

  it('encode: same ids, many at once over several tokenizers, after a thread evicted a tokenizer', async () => {
    for (const addSpecialTokens of [false, true]) {
      expect(await pooled.encode(tokenizer, long, addSpecialTokens)).toEqual(tokenizer.encode(long, { addSpecialTokens }));
    }
    const one = new PreprocessPool({ threads: 1, inlineChars: 0 });
    try {
      // Nine tokenizers: the thread keeps eight, so the first is sent again when it says `missing`.
      const many = Array.from({ length: 9 }, () => Tokenizer.fromJson(tokenizerJson, config));
      const texts = many.map((_, i) => `${long}${i}`);
      expect(await Promise.all(many.map((t, i) => one.encode(t, texts[i]!, false)))).toEqual(texts.map((t) => tokenizer.encode(t)));
      expect(await one.encode(many[0]!, 'again', false)).toEqual(tokenizer.encode('again'));
      expect(await one.chatPrompt(many[0]!, chatml, job({}))).toEqual(await inline.chatPrompt(tokenizer, chatml, job({})));
    } finally {
      await one.close();
    }
  });

  it('small requests stay inline; a pool with threads runs them on the caller\'s loop', async () => {
    const small = new PreprocessPool({ threads: 1, inlineChars: 10_000 });
    try {
      expect(await small.chatPrompt(tokenizer, chatml, job({ messages: [{ role: 'user', content: 'hi' }] }))).toEqual(await inline.chatPrompt(tokenizer, chatml, job({ messages: [{ role: 'user', content: 'hi' }] })));
      expect(small.threadsForTest()).toEqual([undefined]); // no thread was started
    } finally {
      await small.close();
    }
  });

  it('runs mid-sized requests inline while the loop is idle and on a thread while it is busy', async () => {
    let busy = false;
    const pool = new PreprocessPool({ threads: 1, inlineChars: 16, idleInlineChars: 400, loopLoad: { busy: () => busy } });
    const mid = job({ messages: [{ role: 'user', content: 'a prompt of a few dozen characters, under the idle bound' }] });
    const large = job({ messages: [{ role: 'user', content: 'x'.repeat(500) }] });
    try {
      expect(await pool.chatPrompt(tokenizer, chatml, mid)).toEqual(await inline.chatPrompt(tokenizer, chatml, mid));
      expect(pool.threadsForTest()).toEqual([undefined]);
      // Over the idle bound: a thread even while the loop is idle.
      expect(await pool.chatPrompt(tokenizer, chatml, large)).toEqual(await inline.chatPrompt(tokenizer, chatml, large));
      const thread = pool.threadsForTest()[0];
      expect(thread).toBeDefined();
      await pool.close();
      const again = new PreprocessPool({ threads: 1, inlineChars: 16, idleInlineChars: 400, loopLoad: { busy: () => busy } });
      busy = true;
      try {
        expect(await again.chatPrompt(tokenizer, chatml, mid)).toEqual(await inline.chatPrompt(tokenizer, chatml, mid));
        expect(again.threadsForTest()[0]).toBeDefined();
      } finally {
        await again.close();
      }
    } finally {
      await pool.close();
    }
  });

  it('keeps every request on the threads with inlineChars 0, whatever the loop', () => {
    expect(compilePreprocessPoolOptions({ inlineChars: 0 }).idleInlineChars).toBe(0);
    expect(compilePreprocessPoolOptions({ inlineChars: 2000 }).idleInlineChars).toBe(2000);
    expect(compilePreprocessPoolOptions({}).idleInlineChars).toBe(DEFAULT_PREPROCESS_IDLE_INLINE_CHARS);
  });
});

describe('PreprocessPool limits and failures', () => {
  it('refuses past maxPending with capacity_exhausted, and takes calls again once they drain', async () => {
    const pool = new PreprocessPool({ threads: 1, maxPending: 2, inlineChars: 0 });
    try {
      const big = 'hello world '.repeat(20_000);
      const first = [pool.encode(tokenizer, big, false), pool.encode(tokenizer, big, false)];
      expect(pool.pending).toBe(2);
      const refused = await settle(pool.encode(tokenizer, big, false));
      expect(refused).toEqual({ code: 'capacity_exhausted', message: 'prompt preprocessing is at capacity: 2 prompts are waiting; retry later' });
      expect((await Promise.all(first)).map((ids) => ids.length)).toEqual([tokenizer.encode(big).length, tokenizer.encode(big).length]);
      expect(pool.pending).toBe(0);
      expect(await pool.encode(tokenizer, 'again', false)).toEqual(tokenizer.encode('again'));
    } finally {
      await pool.close();
    }
  });

  it('a thread that dies fails only its calls and is replaced', async () => {
    const pool = new PreprocessPool({ threads: 2, inlineChars: 0 });
    try {
      const big = 'hello world '.repeat(200_000);
      const onFirst = settle(pool.encode(tokenizer, big, false)); // slot 0
      const onSecond = settle(pool.encode(tokenizer, 'the other thread', false)); // slot 1, the idle one
      const [first] = pool.threadsForTest();
      await first!.terminate();
      expect(await onFirst).toEqual({ code: 'internal', message: expect.stringMatching(/^prompt preprocessing thread failed: it exited with code \d+$/) });
      expect(await onSecond).toEqual({ ok: tokenizer.encode('the other thread') });
      expect(pool.pending).toBe(0);
      const again = await Promise.all([pool.encode(tokenizer, 'one', false), pool.encode(tokenizer, 'two', false)]);
      expect(again).toEqual([tokenizer.encode('one'), tokenizer.encode('two')]);
      const [replaced] = pool.threadsForTest();
      expect(replaced).toBeDefined();
      expect(replaced).not.toBe(first);
    } finally {
      await pool.close();
    }
  });

  it('closeWhenIdle lets the calls in flight finish, then stops the threads; the shared pool is replaced only for new options', async () => {
    const pool = new PreprocessPool({ threads: 1, inlineChars: 0 });
    const inFlight = pool.encode(tokenizer, long, false);
    pool.closeWhenIdle();
    expect(pool.threadsForTest()[0]).toBeDefined();
    expect(await pool.encode(tokenizer, long, true)).toEqual(tokenizer.encode(long, { addSpecialTokens: true })); // inline now
    expect(await inFlight).toEqual(tokenizer.encode(long));
    expect(pool.threadsForTest()).toEqual([undefined]);
    const shared = sharedPreprocessPool();
    configureSharedPreprocessPool({});
    expect(sharedPreprocessPool()).toBe(shared);
    configureSharedPreprocessPool({ inlineChars: 7 });
    expect(sharedPreprocessPool()).not.toBe(shared);
    expect(sharedPreprocessPool().inlineChars).toBe(7);
    configureSharedPreprocessPool({});
  });

  it('a request that cannot be copied to a thread is refused and leaves nothing pending', async () => {
    const pool = new PreprocessPool({ threads: 1, inlineChars: 0 });
    try {
      const odd = { messages: [{ role: 'user', content: 'x', extra: () => 1 }], addSpecialTokens: false, contextLength: 100 } as unknown as ChatPromptJob;
      expect(await settle(pool.chatPrompt(tokenizer, chatml, odd))).toMatchObject({ code: 'internal' });
      expect(pool.pending).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it('idle threads never keep a process alive; a pending call does until it is answered', async () => {
    const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
    const script = `
      const { PreprocessPool, Tokenizer, ChatTemplate } = await import(${JSON.stringify(entry)});
      const files = ${JSON.stringify({ tokenizerJson, config })};
      const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.config);
      const pool = new PreprocessPool({ threads: 2, inlineChars: 0 });
      const r = await pool.chatPrompt(tokenizer, ChatTemplate.fromTokenizerConfig(files.config), { messages: [{ role: 'user', content: 'hi' }], addSpecialTokens: false, contextLength: 100 });
      pool.encode(tokenizer, 'late', false).then((ids) => console.log('late', ids.length));
      console.log('answered', r.ids.length);
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000 });
    expect(stdout).toBe(`answered ${tokenizer.encode(chatml.render([{ role: 'user', content: 'hi' }], { add_generation_prompt: true })).length}\nlate ${tokenizer.encode('late').length}\n`);
  }, 30_000);

  it('options: validated in one place; textSize counts strings and keys up to its limit', () => {
    expect(compilePreprocessPoolOptions({ threads: 0, maxPending: 1, inlineChars: 0 })).toEqual({ threads: 0, maxPending: 1, inlineChars: 0, idleInlineChars: 0 });
    expect(() => compilePreprocessPoolOptions({ idleInlineChars: -1 })).toThrow(/idleInlineChars must be a non-negative integer/);
    expect(() => compilePreprocessPoolOptions({ threads: -1 })).toThrow(/threads must be an integer in 0\.\.64/);
    expect(() => compilePreprocessPoolOptions({ maxPending: 0 })).toThrow(/maxPending must be a positive integer/);
    expect(() => configureSharedPreprocessPool({ inlineChars: 1.5 })).toThrow(/inlineChars/);
    expect(textSize([{ role: 'user', content: 'abc' }, ['de']], 1000)).toBe(4 + 4 + 7 + 3 + 2);
    expect(textSize(['x'.repeat(100), 'y'.repeat(100)], 50)).toBe(100);
    expect(textSize(undefined, 10)).toBe(0);
  });
});
