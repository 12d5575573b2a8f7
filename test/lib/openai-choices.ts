/**
 * `n` choices and logprobs driven with the official openai SDK, shared by the suites that serve the
 * tiny ONNX LLM (a worker alone, and the router in front of one): each function is one test body.
 */
import type OpenAI from 'openai';
import { expect } from 'vitest';

type ChatCompletion = OpenAI.Chat.Completions.ChatCompletion;

// Several 16-token blocks long, so the later choices can be served from the first one's blocks.
const PROMPT = 'Explain in plain words why a shared prompt prefix lets later requests skip recomputing attention keys and values.';

/** Tokens each choice generated, read from its logprobs (one entry per token). */
const tokensOf = (c: ChatCompletion['choices'][number]): number => c.logprobs?.content?.length ?? 0;

/**
 * n = 3 with a seed: three choices with their own index, seed + i each (each equals an n = 1 request
 * with that seed), the prompt counted once in usage, the completions summed, and the later choices
 * served from the first one's prompt blocks (cached_tokens).
 */
export async function nChoicesShareThePrompt(openai: OpenAI, model: string, tag: string): Promise<void> {
  const messages = [{ role: 'user' as const, content: `${tag}: ${PROMPT}` }];
  const base = { model, messages, max_tokens: 8, temperature: 1, seed: 1234, logprobs: true };
  const r = await openai.chat.completions.create({ ...base, n: 3 });
  expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
  const texts = r.choices.map((c) => c.message.content);
  expect(new Set(texts).size).toBeGreaterThan(1); // distinct seeds, distinct samples
  const one = await openai.chat.completions.create({ ...base, n: 1 });
  expect(r.usage!.prompt_tokens).toBe(one.usage!.prompt_tokens);
  expect(r.usage!.prompt_tokens).toBeGreaterThan(32);
  expect(r.usage!.completion_tokens).toBe(r.choices.reduce((n, c) => n + tokensOf(c), 0));
  expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
  // choices 1 and 2 started after choice 0 computed the prompt: its full blocks were cache hits
  expect(r.usage!.prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(16 * Math.floor((r.usage!.prompt_tokens - 1) / 16) - 16);
  expect(r.usage!.prompt_tokens_details?.cached_tokens).toBeLessThan(r.usage!.prompt_tokens);
  // choice i samples with seed + i (vLLM)
  expect(one.choices[0]!.message.content).toBe(texts[0]);
  const second = await openai.chat.completions.create({ ...base, seed: 1235 });
  expect(second.choices[0]!.message.content).toBe(texts[1]);

  // Streamed: the same choices, chunks tagged with their index, one role chunk and one finish each.
  const stream = await openai.chat.completions.create({ ...base, n: 3, stream: true, stream_options: { include_usage: true } });
  const streamed = ['', '', ''];
  const roles = [0, 0, 0];
  const finishes = [0, 0, 0];
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      streamed[c.index] += c.delta.content ?? '';
      if (c.delta.role === 'assistant') roles[c.index]!++;
      if (c.finish_reason != null) finishes[c.index]!++;
    }
  }
  expect(streamed).toEqual(texts);
  expect(roles).toEqual([1, 1, 1]);
  expect(finishes).toEqual([1, 1, 1]);
  expect(usage).toMatchObject({ prompt_tokens: r.usage!.prompt_tokens, completion_tokens: r.usage!.completion_tokens });
}

/** Greedy chat with top_logprobs: the chosen token is the best alternative, alternatives best first, probabilities sum to at most 1. */
export async function chatTopLogprobs(openai: OpenAI, model: string): Promise<void> {
  const base = { model, messages: [{ role: 'user' as const, content: 'Name three colours.' }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 5 };
  const r = await openai.chat.completions.create(base);
  const content = r.choices[0]!.logprobs!.content!;
  expect(content).toHaveLength(r.usage!.completion_tokens);
  for (const t of content) {
    expect(t.top_logprobs).toHaveLength(5);
    const lps = t.top_logprobs.map((a) => a.logprob);
    expect(lps).toEqual([...lps].sort((a, b) => b - a));
    expect(t.top_logprobs[0]).toEqual({ token: t.token, logprob: t.logprob, bytes: t.bytes });
    expect(t.logprob).toBeLessThanOrEqual(0);
    expect(lps.reduce((s, lp) => s + Math.exp(lp), 0)).toBeLessThanOrEqual(1 + 1e-6);
    expect(t.bytes).toEqual([...Buffer.from(t.token)]);
  }

  // Streamed: the same entries, spread over the chunks.
  const stream = await openai.chat.completions.create({ ...base, stream: true });
  const streamed: OpenAI.Chat.Completions.ChatCompletionTokenLogprob[] = [];
  for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  expect(streamed).toEqual(content);

  // Without top_logprobs: the chosen token's logprob only.
  const plain = await openai.chat.completions.create({ ...base, top_logprobs: undefined });
  expect(plain.choices[0]!.logprobs!.content!.map((t) => [t.token, t.logprob, t.top_logprobs])).toEqual(content.map((t) => [t.token, t.logprob, []]));
}

/** Completions over a batch of two prompts with n = 2 and logprobs = 3: four choices, prompt-major. */
export async function batchedCompletionLogprobs(openai: OpenAI, model: string): Promise<void> {
  const prompts = ['The quick brown fox', 'Once upon a time'];
  const base = { model, prompt: prompts, max_tokens: 4, temperature: 0, logprobs: 3, n: 2 };
  const r = await openai.completions.create(base);
  expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
  const single = await Promise.all(prompts.map((prompt) => openai.completions.create({ ...base, prompt, n: 1 })));
  // greedy: both choices of a prompt are its n = 1 completion
  expect(r.choices.map((c) => c.text)).toEqual([single[0]!.choices[0]!.text, single[0]!.choices[0]!.text, single[1]!.choices[0]!.text, single[1]!.choices[0]!.text]);
  expect(r.usage!.prompt_tokens).toBe(single[0]!.usage!.prompt_tokens + single[1]!.usage!.prompt_tokens);
  expect(r.usage!.completion_tokens).toBe(2 * (single[0]!.usage!.completion_tokens + single[1]!.usage!.completion_tokens));
  for (const c of r.choices) {
    const lp = c.logprobs!;
    expect(lp.tokens).toHaveLength(single[Math.floor(c.index / 2)]!.usage!.completion_tokens);
    lp.top_logprobs!.forEach((top, j) => {
      // the greedy token is among the (up to) 3 alternatives, the most likely of them
      expect(top[lp.tokens![j]!]).toBe(lp.token_logprobs![j]);
      expect(lp.token_logprobs![j]).toBe(Math.max(...Object.values(top)));
      expect(Object.keys(top).length).toBeLessThanOrEqual(3);
      expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
    });
    expect(lp.text_offset![0]).toBe(0);
  }

  // Streamed: every chunk names its choice; each choice's text and logprobs add up to the body's.
  const stream = await openai.completions.create({ ...base, stream: true });
  const texts = ['', '', '', ''];
  const tokens: string[][] = [[], [], [], []];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      texts[c.index] += c.text;
      tokens[c.index]!.push(...(c.logprobs?.tokens ?? []));
    }
  }
  expect(texts).toEqual(r.choices.map((c) => c.text));
  expect(tokens).toEqual(r.choices.map((c) => c.logprobs!.tokens));
}
