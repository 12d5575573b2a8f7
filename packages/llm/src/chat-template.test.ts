import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';
import { isSwitchyardError } from '@switchyard/common';
import { ChatTemplate, detectContentFormat, type ChatMessage } from './chat-template.js';
import { Tokenizer } from './tokenizer/tokenizer.js';

const messages: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'What is the capital of France?' },
  { role: 'assistant', content: 'Paris.' },
  { role: 'user', content: 'Grüße 👋' },
];

const isInvalid = (e: unknown): boolean => isSwitchyardError(e) && e.code === 'invalid_argument';

describe('ChatTemplate (ChatML of the tiny model)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'llm-chat-'));
    for (const [name, text] of Object.entries(buildTinyTokenizerFiles())) writeFileSync(join(dir, name), text);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('renders the exact ChatML string, with and without the generation prompt', async () => {
    const template = await ChatTemplate.fromModelFolder(dir);
    const body =
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' +
      '<|im_start|>user\nWhat is the capital of France?<|im_end|>\n' +
      '<|im_start|>assistant\nParis.<|im_end|>\n' +
      '<|im_start|>user\nGrüße 👋<|im_end|>\n';
    expect(template.render(messages)).toBe(body);
    expect(template.render(messages, { add_generation_prompt: true })).toBe(`${body}<|im_start|>assistant\n`);
  });

  it('the rendered prompt tokenizes with one id per ChatML marker', async () => {
    const template = await ChatTemplate.fromModelFolder(dir);
    const tokenizer = await Tokenizer.fromModelFolder(dir);
    const ids = tokenizer.encode(template.render([{ role: 'user', content: 'hi' }], { add_generation_prompt: true }));
    const { imStart, imEnd } = tinySpecialTokenIds();
    expect(ids.filter((id) => id === imStart)).toHaveLength(2);
    expect(ids.filter((id) => id === imEnd)).toHaveLength(1);
    expect(ids[0]).toBe(imStart);
  });

  it('a chat_template.jinja file wins over tokenizer_config; named templates pick default', () => {
    expect(ChatTemplate.fromTokenizerConfig({ chat_template: 'A' }, 'B{{ eos_token }}')!.render([])).toBe('B');
    const named = ChatTemplate.fromTokenizerConfig({
      eos_token: { content: '</s>' },
      chat_template: [
        { name: 'tool_use', template: 'tools' },
        { name: 'default', template: '{{ messages[0].content }}{{ eos_token }}' },
      ],
    });
    expect(named!.render([{ role: 'user', content: 'x' }])).toBe('x</s>');
    expect(ChatTemplate.fromTokenizerConfig({})).toBeUndefined();
  });

  it('passes extra variables but never lets them override messages', () => {
    const t = new ChatTemplate('{{ greeting }} {{ messages | length }} {{ add_generation_prompt }}');
    expect(t.render(messages, { extra: { greeting: 'hey', messages: [] } })).toBe('hey 4 false');
  });

  it('raise_exception and broken templates are invalid_argument', () => {
    const strict = new ChatTemplate(
      "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}ok",
    );
    expect(strict.render([{ role: 'user', content: 'a' }])).toBe('ok');
    expect(() => strict.render(messages)).toThrow('first message must be from the user');
    try {
      strict.render(messages);
    } catch (e) {
      expect(isInvalid(e)).toBe(true);
    }
    expect(() => new ChatTemplate('{% for %}')).toThrow(/does not parse/);
  });

  it('fromModelFolder is not_found when the folder has no template', async () => {
    const bare = mkdtempSync(join(tmpdir(), 'llm-chat-bare-'));
    try {
      writeFileSync(join(bare, 'tokenizer.json'), buildTinyTokenizerFiles()['tokenizer.json']);
      await expect(ChatTemplate.fromModelFolder(bare)).rejects.toSatisfy((e) => isSwitchyardError(e) && e.code === 'not_found');
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });
});

describe('detectContentFormat (vLLM --chat-template-content-format auto)', () => {
  it("'openai' for templates that loop over a message's content parts, 'string' for the rest", () => {
    // Gemma 3, Llama 4, Qwen2-VL
    expect(detectContentFormat("{%- for item in message['content'] -%}{%- if item['type'] == 'text' -%}{{ item['text'] }}{%- endif -%}{%- endfor -%}")).toBe('openai');
    expect(detectContentFormat("{%- for content in message['content'] | sort(attribute='type') %}{{ content['text'] }}{% endfor %}")).toBe('openai');
    expect(detectContentFormat('{% for content in message.content %}{{ content.text }}{% endfor %}')).toBe('openai');
    // ChatML, Llama 3
    expect(detectContentFormat("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] }}{% endfor %}")).toBe('string');
    expect(detectContentFormat("{{ message['content'] | trim }}{% for m in messages %}{% endfor %}")).toBe('string');
  });
});
