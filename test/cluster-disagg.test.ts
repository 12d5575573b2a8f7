/**
 * Disaggregated prefill and decode end to end (test/support/cluster.ts: private etcd, NATS, Redis;
 * worker and router processes; the official `openai` SDK). One cluster for the file: a router
 * (`--disagg-min-remote-tokens=32`), one prefill worker and one decode worker serving tiny_llm (fp32
 * KV), tiny_llm_fp16 and a slowed-down mock_llm; a standalone aggregated worker over the same repository
 * gives the reference outputs. The prefill worker advertises its KV transfer server through a TCP proxy
 * of the test (`--kv-transfer-address 127.0.0.1:<proxy port>`), which corrupts or holds back a transfer
 * on demand.
 *
 * The tests run in order; each leaves the cluster serving, except the last, which kills the prefill
 * worker:
 * 1. greedy output identical token for token to the standalone worker (tiny_llm and tiny_llm_fp16; long,
 *    short and partly-cached prompts), remote / local counted, the KV transfer byte counters moved, the
 *    partly-cached prompt pulled only what the decode worker lacked;
 * 2. KServe generate through the router identical too; seeded sampling identical; a streamed completion
 *    with a stop string past the first token and usage: the same text and counts;
 * 3. remote vs local following the router's thresholds (short prompt, cached prompt, max_tokens 1, a
 *    second router whose prefill pool counts as saturated);
 * 4. a layout mismatch (a decode worker with the fp16 model under the same name) → local prefill,
 *    stated in the logs and counted `fallback`;
 * 5. a corrupt transfer (a flipped byte) → refused, the request completes identically, `fallback`;
 * 6. a client that disconnects during a transfer → both workers' pinned blocks back to 0;
 * 7. the decode worker dies mid-stream → the stream migrates to another decode worker, no token lost;
 * 8. kill -9 of the prefill worker during a transfer → the request completes.
 * Between 3 and 4, a scripted decoder (test/lib/scripted-llm.ts) answering reasoning and hermes tool
 * calls, prefilled remotely: the router parses the same tool calls, content and reasoning from the
 * disaggregated stream as the standalone worker from its aggregated one, streamed and not. The script
 * continues only when the decode worker holds the prefill worker's KV (its markers live in the cache).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Tokenizer } from '@switchyard/llm';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { repoRoot, startWorkerProcess, type RouterProcess, type WorkerProcess } from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { metricsText, routingDecisions, total } from './lib/metrics.js';
import { SLOW_MOCK_CONFIG, mockerText } from './lib/mock-llm.js';
import { scriptedModelFiles } from './lib/scripted-llm.js';
import { post } from './lib/tensors.js';
import { startTcpProxy, type TcpProxy } from './lib/tcp-proxy.js';
import { sleep, waitFor } from './lib/wait-for.js';
import { startCluster, type Cluster } from './support/cluster.js';

const MIN_REMOTE = 32;
const LLMS = ['tiny_llm', 'tiny_llm_fp16'] as const;
/** The scripted tool-calling model: its reply, and what a client must see of it. */
const TOOLS_MODEL = 'scripted_hermes';
const TOOLS_REPLY =
  '<think>\nTwo lookups.\n</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>';
const TOOLS_CONFIG = readFileSync(join(repoRoot(), 'test/fixtures/tool_call_repository', TOOLS_MODEL, 'config.pbtxt'), 'utf8');
const LOAD = (...models: string[]) => ['--model-control-mode=explicit', ...models.map((m) => `--load-model=${m}`)];

let cluster: Cluster;
let prefill: WorkerProcess;
let decode: WorkerProcess;
let standalone: WorkerProcess;
let proxy: TcpProxy;
let mismatchRepo: FixtureRepository;
let openai: OpenAI;
let reference: OpenAI;

/** tiny_llm's config.pbtxt under another model name. */
const renamedConfig = (from: string, to: string): string =>
  readFileSync(join(repoRoot(), 'test/fixtures/llm_repository', from, 'config.pbtxt'), 'utf8').replace(`name: "${from}"`, `name: "${to}"`);
/** onnx-builder's files of `from` (model.onnx, tokenizer, config.json) as the version folder of `to`. */
const renamedFiles = (from: string, to: string): Record<string, Uint8Array> =>
  Object.fromEntries(llmFixtureRepositoryFiles().filter((f) => f.path.startsWith(`${from}/`)).map((f) => [`${to}/${f.path.slice(from.length + 1)}`, f.build()]));

beforeAll(async () => {
  // the prefill worker's KV transfer server binds a port of its own (0) and logs it; the proxy, whose
  // port the worker advertises, is pointed at it then (a port picked here and bound later can be taken)
  proxy = await startTcpProxy();
  const mismatchFiles = { ...renamedFiles('tiny_llm', 'mm_llm'), 'mm_llm/config.pbtxt': new TextEncoder().encode(renamedConfig('tiny_llm', 'mm_llm')) };
  cluster = await startCluster({
    workers: [
      ['--role=prefill', `--kv-transfer-address=127.0.0.1:${proxy.port}`, ...LOAD(...LLMS, 'mock_llm', 'mm_llm', TOOLS_MODEL)],
      ['--role=decode', '--kv-transfer-address=127.0.0.1', ...LOAD(...LLMS, 'mock_llm', TOOLS_MODEL)],
    ],
    routerArgs: [`--disagg-min-remote-tokens=${MIN_REMOTE}`, '--stall-probe-ms=1000'],
    files: { 'mock_llm/config.pbtxt': SLOW_MOCK_CONFIG, ...mismatchFiles, ...scriptedModelFiles(TOOLS_MODEL, TOOLS_REPLY), [`${TOOLS_MODEL}/config.pbtxt`]: TOOLS_CONFIG },
    waitForModels: [...LLMS, 'mock_llm', TOOLS_MODEL],
  });
  // workers join in any order: tell them by the role they logged
  const roleOf = (w: WorkerProcess): unknown => (w.logs().find((l) => l.msg === 'worker started')?.cluster as { role?: string } | undefined)?.role;
  await waitFor(async () => cluster.workers.every((w) => roleOf(w) !== undefined), { message: 'the workers did not log their roles' });
  prefill = cluster.workers.find((w) => roleOf(w) === 'prefill')!;
  decode = cluster.workers.find((w) => roleOf(w) === 'decode')!;
  expect([prefill, decode].every((w) => w !== undefined)).toBe(true);
  let listening: unknown;
  await waitFor(async () => typeof (listening = prefill.logs().find((l) => l.msg === 'KV transfer server listening')?.listening) === 'string', {
    message: 'the prefill worker did not log its KV transfer server',
  });
  proxy.retarget({ host: '127.0.0.1', port: Number((listening as string).slice((listening as string).lastIndexOf(':') + 1)) });
  standalone = await startWorkerProcess({ modelRepositories: [cluster.repo.path], args: LOAD(...LLMS, TOOLS_MODEL) });
  openai = new OpenAI({ baseURL: `${cluster.router.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
  reference = new OpenAI({ baseURL: `${standalone.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await standalone?.stop();
  await cluster?.stop();
  await proxy?.close();
  mismatchRepo?.remove();
});

const routerMetrics = (router: RouterProcess = cluster.router): Promise<string> => metricsText(router.metricsUrl);
const workerMetrics = (w: WorkerProcess): Promise<string> => metricsText(w.metricsUrl);
const disagg = (text: string, model: string, path: 'remote' | 'local' | 'fallback'): number => total(text, 'switchyard_router_disagg_requests_total', `model="${model}"`, `path="${path}"`);
const localReason = (text: string, model: string, reason: string): number => total(text, 'switchyard_router_disagg_local_total', `model="${model}"`, `reason="${reason}"`);
const bytes = (text: string, direction: 'in' | 'out'): number => total(text, 'switchyard_worker_kv_transfer_bytes_total', `direction="${direction}"`);
const pinned = async (w: WorkerProcess): Promise<number> => total(await workerMetrics(w), 'switchyard_worker_kv_pinned_blocks');
const nothingPinned = (): Promise<void> =>
  waitFor(async () => (await pinned(prefill)) === 0 && (await pinned(decode)) === 0, { timeoutMs: 5_000, message: 'KV blocks stayed pinned' });

/** Sentences of a story, joined: a prompt of roughly `n` × 60 characters that shares nothing with another seed. */
const story = (seed: string, n: number): string => Array.from({ length: n }, (_, i) => `${seed} chapter ${i}: the convoy crossed the valley at dawn.`).join(' ');

type Params = Omit<OpenAI.CompletionCreateParamsNonStreaming, 'model' | 'prompt'>;
async function both(model: string, prompt: string, params: Params): Promise<{ cluster: OpenAI.Completion; reference: OpenAI.Completion }> {
  const body = { model, prompt, ...params, stream: false as const };
  const viaCluster = await openai.completions.create(body);
  const viaReference = await reference.completions.create(body);
  return { cluster: viaCluster, reference: viaReference };
}

describe('disaggregated prefill and decode', () => {
  it('greedy output equals a standalone aggregated worker token for token (fp32 and fp16 KV; long, short and partly cached prompts)', async () => {
    for (const model of LLMS) {
      const m0 = await routerMetrics();
      const [p0, d0] = await Promise.all([workerMetrics(prefill), workerMetrics(decode)]);
      // long: remote (the decode worker holds none of it)
      const shared = story(`${model} A`, 4);
      const long = await both(model, `${shared} ${story('first tail', 2)}`, { max_tokens: 24, temperature: 0, logprobs: 3 });
      expect(long.cluster.choices[0]!.text).toBe(long.reference.choices[0]!.text);
      const [lc, lr] = [long.cluster.choices[0]!.logprobs!, long.reference.choices[0]!.logprobs!];
      expect(lc.tokens).toEqual(lr.tokens);
      // the alternatives too: the first token's from the prefill worker, the rest from the decode worker
      expect(lc.top_logprobs!.map((t) => Object.keys(t))).toEqual(lr.top_logprobs!.map((t) => Object.keys(t)));
      lc.token_logprobs!.forEach((lp, i) => expect(lp).toBeCloseTo(lr.token_logprobs![i]!, 3));
      expect(long.cluster.usage).toMatchObject({ completion_tokens: 24, prompt_tokens: long.reference.usage!.prompt_tokens });
      const m1 = await routerMetrics();
      expect(disagg(m1, model, 'remote') - disagg(m0, model, 'remote')).toBe(1);
      const [p1, d1] = await Promise.all([workerMetrics(prefill), workerMetrics(decode)]);
      const fullPull = bytes(d1, 'in') - bytes(d0, 'in');
      expect(fullPull).toBeGreaterThan(0);
      expect(bytes(p1, 'out') - bytes(p0, 'out')).toBe(fullPull);

      // short: local, on the decode worker
      const short = await both(model, 'Hello there', { max_tokens: 16, temperature: 0 });
      expect(short.cluster.choices[0]!.text).toBe(short.reference.choices[0]!.text);
      const m2 = await routerMetrics();
      expect(localReason(m2, model, 'short_prompt') - localReason(m1, model, 'short_prompt')).toBe(1);

      // partly cached on the decode worker: remote, and only the blocks it lacks move
      const partial = await both(model, `${shared} ${story('second tail', 2)}`, { max_tokens: 24, temperature: 0 });
      expect(partial.cluster.choices[0]!.text).toBe(partial.reference.choices[0]!.text);
      const m3 = await routerMetrics();
      expect(disagg(m3, model, 'remote') - disagg(m2, model, 'remote')).toBe(1);
      const d3 = await workerMetrics(decode);
      const partialPull = bytes(d3, 'in') - bytes(d1, 'in');
      expect(partialPull).toBeGreaterThan(0);
      expect(partialPull).toBeLessThan(fullPull);
      expect(disagg(m3, model, 'fallback')).toBe(disagg(m0, model, 'fallback'));
      await nothingPinned();
    }
  }, 120_000);

  it('KServe generate through the router: the same text as the standalone worker, prefilled remotely', async () => {
    const m0 = await routerMetrics();
    const body = { text_input: story('kserve', 5), exclude_input_in_output: true, parameters: { temperature: 0, max_tokens: 16 } };
    const viaRouter = await post(`${cluster.router.httpUrl}/v2/models/tiny_llm/generate`, body);
    const viaWorker = await post(`${standalone.httpUrl}/v2/models/tiny_llm/generate`, body);
    expect(viaRouter.status).toBe(200);
    expect(viaRouter.json().text_output).toBe(viaWorker.json().text_output);
    expect(viaRouter.json()).toMatchObject({ completion_tokens: 16 });
    expect(disagg(await routerMetrics(), 'tiny_llm', 'remote') - disagg(m0, 'tiny_llm', 'remote')).toBe(1);
  }, 30_000);

  it('seeded sampling equals the standalone worker too', async () => {
    for (const model of LLMS) {
      const m0 = await routerMetrics();
      const sampled = await both(model, story(`${model} seeded`, 5), { max_tokens: 24, temperature: 0.9, seed: 1234 });
      expect(sampled.cluster.choices[0]!.text).toBe(sampled.reference.choices[0]!.text);
      expect(disagg(await routerMetrics(), model, 'remote') - disagg(m0, model, 'remote')).toBe(1);
      // and it is sampling: another seed gives another text
      const other = await reference.completions.create({ model, prompt: story(`${model} seeded`, 5), max_tokens: 24, temperature: 0.9, seed: 99 });
      expect(other.choices[0]!.text).not.toBe(sampled.reference.choices[0]!.text);
    }
  }, 60_000);

  it('a streamed completion with a stop string and usage: the same text, the same counts, prefilled remotely', async () => {
    const model = 'tiny_llm';
    const prompt = story('streamed stop', 5);
    const full = await reference.completions.create({ model, prompt, max_tokens: 24, temperature: 0 });
    const text = full.choices[0]!.text;
    // a stop string well past the first token, so it is matched on the decode worker's tokens
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
    expect(stop.trim().length).toBeGreaterThan(0);
    const m0 = await routerMetrics();
    const streamed = async (client: OpenAI): Promise<{ text: string; usage: OpenAI.CompletionUsage | undefined; finish: string | null }> => {
      let out = '';
      let usage: OpenAI.CompletionUsage | undefined;
      let finish: string | null = null;
      const stream = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stop, stream: true, stream_options: { include_usage: true } });
      for await (const chunk of stream) {
        out += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      return { text: out, usage, finish };
    };
    const viaCluster = await streamed(openai);
    const viaReference = await streamed(reference);
    expect(viaReference.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(viaCluster).toMatchObject({ text: viaReference.text, finish: 'stop' });
    expect(viaCluster.usage).toMatchObject({ prompt_tokens: viaReference.usage!.prompt_tokens, completion_tokens: viaReference.usage!.completion_tokens });
    expect(disagg(await routerMetrics(), model, 'remote') - disagg(m0, model, 'remote')).toBe(1);
    await nothingPinned();
  }, 30_000);

  it('remote or local follows the router thresholds', async () => {
    const model = 'tiny_llm';
    const prompt = story('thresholds', 5);
    const m0 = await routerMetrics();
    await openai.completions.create({ model, prompt, max_tokens: 4, temperature: 0 }); // uncached: remote
    // the decode worker's imported blocks reach the router as KV events (JetStream) before the repeat
    const applied = (text: string): number => total(text, 'switchyard_router_kv_events_applied_total');
    await waitFor(async () => applied(await routerMetrics()) > applied(m0), { timeoutMs: 5_000, message: 'no KV events reached the router' });
    await sleep(300);
    await openai.completions.create({ model, prompt, max_tokens: 4, temperature: 0 }); // cached on the decode worker now: local
    await openai.completions.create({ model, prompt: story('one token', 5), max_tokens: 1, temperature: 0 }); // a one-token request is a prefill
    const m1 = await routerMetrics();
    expect(disagg(m1, model, 'remote') - disagg(m0, model, 'remote')).toBe(1);
    expect(localReason(m1, model, 'short_prompt') - localReason(m0, model, 'short_prompt')).toBe(1);
    expect(localReason(m1, model, 'single_token') - localReason(m0, model, 'single_token')).toBe(1);

    // a router replica for which every prefill worker is saturated prefills on the decode worker
    const saturated = await cluster.addRouter([`--disagg-min-remote-tokens=${MIN_REMOTE}`, '--disagg-max-prefill-queue-tokens=0']);
    await cluster.waitForModels([model], saturated);
    const client = new OpenAI({ baseURL: `${saturated.httpUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
    const r = await client.completions.create({ model, prompt: story('saturated', 5), max_tokens: 4, temperature: 0 });
    expect(r.usage?.completion_tokens).toBe(4);
    const s = await routerMetrics(saturated);
    expect(localReason(s, model, 'prefill_saturated')).toBe(1);
    expect(disagg(s, model, 'remote')).toBe(0);
    await saturated.stop();
    cluster.routers.splice(cluster.routers.indexOf(saturated), 1);
  }, 60_000);

  it('tool calls and reasoning on a disaggregated stream: the router parses what the standalone worker parses, streamed and not', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'array' } } } } },
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
    ];
    type Seen = { content: string | null; reasoning: string | undefined; finish: string | null; calls: Array<{ name: string; arguments: string }>; usage: unknown };
    const plain = async (client: OpenAI, question: string): Promise<Seen> => {
      const r = await client.chat.completions.create({ model: TOOLS_MODEL, messages: [{ role: 'user', content: question }], tools, temperature: 0 });
      const message = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      const calls = (message.tool_calls ?? []).map((c) => (c as OpenAI.ChatCompletionMessageFunctionToolCall).function);
      return { content: message.content, reasoning: message.reasoning_content, finish: r.choices[0]!.finish_reason, calls, usage: r.usage };
    };
    const streamed = async (client: OpenAI, question: string): Promise<Seen> => {
      const stream = await client.chat.completions.create({ model: TOOLS_MODEL, messages: [{ role: 'user', content: question }], tools, temperature: 0, stream: true, stream_options: { include_usage: true } });
      const seen: Seen = { content: '', reasoning: '', finish: null, calls: [], usage: undefined };
      for await (const chunk of stream) {
        if (chunk.usage) seen.usage = chunk.usage;
        const choice = chunk.choices[0];
        if (choice === undefined) continue;
        const d = choice.delta as OpenAI.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };
        seen.finish = choice.finish_reason ?? seen.finish;
        seen.content += d.content ?? '';
        seen.reasoning += d.reasoning_content ?? '';
        for (const t of d.tool_calls ?? []) {
          if (t.id !== undefined) seen.calls[t.index] = { name: t.function!.name!, arguments: '' };
          seen.calls[t.index]!.arguments += t.function?.arguments ?? '';
        }
      }
      return seen;
    };
    const expected = {
      finish: 'tool_calls',
      calls: [
        { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2]}' },
        { name: 'get_time', arguments: '{"tz": "CET"}' },
      ],
    };
    for (const [kind, ask] of [['whole', plain], ['streamed', streamed]] as const) {
      const question = `${kind}: ${story(`tools ${kind}`, 3)}`;
      const m0 = await routerMetrics();
      const viaCluster = await ask(openai, question);
      const viaReference = await ask(reference, question);
      expect(viaReference).toMatchObject({ ...expected, reasoning: '\nTwo lookups.\n', content: '\n\nChecking.\n' });
      expect(viaCluster).toEqual(viaReference);
      expect(disagg(await routerMetrics(), TOOLS_MODEL, 'remote') - disagg(m0, TOOLS_MODEL, 'remote')).toBe(1);
    }
    await nothingPinned();
  }, 60_000);

  it('a decode worker whose KV layout differs prefills locally: stated in its log and the router log, counted fallback', async () => {
    // mm_llm: the fp32 model on the prefill worker, the fp16 model under the same name on this decode worker
    mismatchRepo = fixtureRepository('llm_repository', {
      files: { ...renamedFiles('tiny_llm_fp16', 'mm_llm'), 'mm_llm/config.pbtxt': new TextEncoder().encode(renamedConfig('tiny_llm_fp16', 'mm_llm')) },
    });
    const clusterFlags = [`--etcd=${cluster.etcd.url}`, `--nats=${cluster.nats.url}`, `--redis=${cluster.redis.url}`, `--namespace=${cluster.namespace}`];
    const odd = await startWorkerProcess({ modelRepositories: [mismatchRepo.path], args: [...clusterFlags, '--role=decode', '--kv-transfer-address=127.0.0.1', ...LOAD('mm_llm')] });
    cluster.workers.push(odd);
    await cluster.waitForModels(['mm_llm']);
    const m0 = await routerMetrics();
    const r = await openai.completions.create({ model: 'mm_llm', prompt: story('mismatch', 5), max_tokens: 12, temperature: 0 });
    expect(r.usage?.completion_tokens).toBe(12);
    expect(disagg(await routerMetrics(), 'mm_llm', 'fallback') - disagg(m0, 'mm_llm', 'fallback')).toBe(1);
    const said = odd.logs().find((l) => l.msg === 'KV transfer not used: prefilling locally');
    expect(String(said?.reason)).toMatch(/^KV layout mismatch: \w+ is .* on the prefill worker and .* here$/);
    expect(cluster.router.logs().some((l) => l.model === 'mm_llm' && String(l.reason).startsWith('KV layout mismatch'))).toBe(true);
    expect(bytes(await workerMetrics(odd), 'in')).toBe(0);
    await waitFor(async () => (await pinned(prefill)) === 0 && (await pinned(odd)) === 0, { timeoutMs: 5_000, message: 'the refused lease stayed pinned' });
    await odd.stop();
    cluster.workers.splice(cluster.workers.indexOf(odd), 1);
  }, 90_000);

  it('a corrupt transfer is refused and the request still completes identically (local prefill, counted fallback)', async () => {
    const model = 'tiny_llm';
    const m0 = await routerMetrics();
    const corrupted = proxy.next({ kind: 'corrupt', offset: 2000 }); // inside the first chunk's block bytes
    const r = await both(model, story('corrupt', 5), { max_tokens: 16, temperature: 0 });
    await corrupted;
    expect(r.cluster.choices[0]!.text).toBe(r.reference.choices[0]!.text);
    expect(disagg(await routerMetrics(), model, 'fallback') - disagg(m0, model, 'fallback')).toBe(1);
    const said = decode.logs().filter((l) => l.msg === 'KV transfer not used: prefilling locally').at(-1);
    expect(String(said?.reason)).toMatch(/checksum|corrupt|CRC/i);
    await nothingPinned();
  }, 60_000);

  it('a client that disconnects during the transfer leaves no block pinned on either worker', async () => {
    const held = proxy.next({ kind: 'stall' }); // the pull's answer is held back
    const ctrl = new AbortController();
    const request = openai.completions
      .create({ model: 'tiny_llm', prompt: story('gone', 5), max_tokens: 64, temperature: 0, stream: true }, { signal: ctrl.signal })
      .then(async (stream) => {
        for await (const _ of stream) {
          // the first token arrives from the prefill worker while the decode worker pulls
        }
      })
      .catch(() => {});
    await held;
    expect(await pinned(prefill)).toBeGreaterThan(0);
    ctrl.abort();
    await request;
    // the decode worker's pull is cancelled and it releases the lease (over a new connection): well before the 30 s TTL
    await nothingPinned();
    await waitFor(async () => total(await workerMetrics(decode), 'vllm:num_requests_running') === 0, { timeoutMs: 5_000, message: 'the decode worker kept generating' });
  }, 30_000);

  it('the decode worker dies mid-stream: the stream migrates to another decode worker without a gap or repeat', async () => {
    const tokenizer = await Tokenizer.fromModelFolder(join(cluster.repo.path, 'mock_llm', '1'));
    const spare = await cluster.addWorker(['--role=decode', '--kv-transfer-address=127.0.0.1', ...LOAD('mock_llm')]);
    const [decodeId, spareId] = await Promise.all([cluster.instanceIdOf(decode), cluster.instanceIdOf(spare)]);
    await waitFor(async () => total(await routerMetrics(), 'switchyard_router_workers', 'model="mock_llm"') === 3, { message: 'the router did not see the spare decode worker' });
    const before = await routerMetrics();
    let victim: WorkerProcess | undefined;
    const stream = await openai.completions.create({ model: 'mock_llm', prompt: story('migrate', 5), max_tokens: 200, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let id = '';
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      text += chunk.choices[0]?.text ?? '';
      if (chunk.usage) usage = chunk.usage;
      if (++chunks === 20) {
        const now = await routerMetrics();
        victim = routingDecisions(now, decodeId) > routingDecisions(before, decodeId) ? decode : routingDecisions(now, spareId) > routingDecisions(before, spareId) ? spare : undefined;
        expect(victim).toBeDefined();
        await victim!.stop('SIGKILL');
      }
    }
    expect(usage).toMatchObject({ completion_tokens: 200 });
    expect(text).toBe(mockerText(tokenizer, id, usage!.prompt_tokens, 200));
    expect(total(await routerMetrics(), 'switchyard_router_migrations_total')).toBeGreaterThan(total(before, 'switchyard_router_migrations_total'));
    cluster.workers.splice(cluster.workers.indexOf(victim!), 1);
    if (victim === decode) decode = spare;
  }, 60_000);

  it('kill -9 of the prefill worker during a transfer: the request completes', async () => {
    const model = 'mock_llm';
    const m0 = await routerMetrics();
    const held = proxy.next({ kind: 'stall' });
    const pending = openai.completions.create({ model, prompt: story('killed', 5), max_tokens: 12, temperature: 0 });
    await held;
    await prefill.stop('SIGKILL');
    const r = await pending;
    expect(r.usage?.completion_tokens).toBe(12);
    expect(r.choices[0]!.finish_reason).toBe('length');
    // the first token came from the prefill worker; its KV never arrived, so the decode worker prefilled
    expect(disagg(await routerMetrics(), model, 'fallback') - disagg(m0, model, 'fallback')).toBe(1);
    expect(String(decode.logs().filter((l) => l.msg === 'KV transfer not used: prefilling locally').at(-1)?.reason)).toMatch(/^KV transfer from 127\.0\.0\.1:\d+ failed/);
    cluster.workers.splice(cluster.workers.indexOf(prefill), 1);
    // and with no prefill worker left, requests are served aggregated
    const after = await openai.completions.create({ model, prompt: story('alone', 5), max_tokens: 4, temperature: 0 });
    expect(after.usage?.completion_tokens).toBe(4);
  }, 60_000);
});
