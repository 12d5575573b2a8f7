/**
 * Disaggregated prefill/decode through the router (memory twins; workers scripted on the wire,
 * test-support/fake-llm-worker.ts): remote vs local decisions following the thresholds, the first token
 * streamed before the decode request, prefill failures retried then done locally without an error,
 * no prefill worker → aggregated, import fallbacks counted, prefill-role instances never given a whole
 * request, aborts during prefill, migration of the decode stream with outputTokenIds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type Logger, internal, silentLogger } from '@switchyard/common';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { serializeBytesElements } from '@switchyard/kserve';
import { type GenerateOutput, type LlmEndpoint, compileSamplingParams, hashTokenBlocks } from '@switchyard/llm';
import type { ModelCard } from '@switchyard/runtime';
import type { DisaggOptions } from './disagg-prefill.js';
import { type RouterCore, startRouterCore } from './router-core.js';
import { type Behaviour, FakeLlmWorker, crash, decodeOk, fail, hang, llmCard, prefillOk, tokenAt, tokensFrom } from './test-support/fake-llm-worker.js';
import { LLM, MockCluster, NS, waitFor } from './test-support/mock-cluster.js';

let cluster: MockCluster | undefined;
let router: RouterCore | undefined;
afterEach(async () => {
  await router?.close();
  await cluster?.close();
  router = undefined;
  cluster = undefined;
});

const MIN_REMOTE = 64;
const LONG = 100; // ≥ MIN_REMOTE uncached tokens: remote
const SHORT = 40;
const prompt = (n: number, seed = 1): number[] => Array.from({ length: n }, (_, i) => 10 + ((seed * 31 + i * 7) % 300));

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const logger: Logger & { warnings: string[] } = {
    warnings,
    trace: () => {},
    debug: () => {},
    info: () => {},
    error: () => {},
    warn: (a: unknown, b?: string) => void warnings.push(typeof a === 'string' ? a : (b ?? '')),
    child: () => logger,
  };
  return logger;
}

async function setup(workers: (card: ModelCard) => Promise<FakeLlmWorker[]>, disagg: Partial<DisaggOptions> = {}, logger: Logger = silentLogger) {
  cluster = new MockCluster();
  const card = await llmCard(cluster);
  const list = await workers(card);
  const table = new MemoryRoutingTable();
  router = await startRouterCore({ ...cluster.routerRoles(), routingTable: table, namespace: NS, routerId: 'd1', disagg: { minRemoteTokens: MIN_REMOTE, ...disagg }, logger });
  await waitFor(() => router!.registry.model(LLM)?.instances.size === list.length, 5000, 'every scripted instance');
  return { card, workers: list, table, llm: router.engine.llmEndpoint(LLM)!, router };
}

/** Run a generation to the end: its tokens, outputs and final output. */
async function run(llm: LlmEndpoint, requestId: string, p: number[], maxTokens: number, options: { seed?: number; signal?: AbortSignal; onOutput?: (o: GenerateOutput) => void } = {}) {
  const tokens: number[] = [];
  const outputs: GenerateOutput[] = [];
  const sampling = compileSamplingParams({ temperature: 0.7, max_tokens: maxTokens, ignore_eos: true, ...(options.seed !== undefined ? { seed: options.seed } : {}) });
  for await (const out of llm.generate({ requestId, promptTokenIds: p, sampling }, options.signal)) {
    tokens.push(...out.tokenIds);
    outputs.push(out);
    options.onOutput?.(out);
  }
  return { tokens, outputs, last: outputs.at(-1)! };
}

const disaggOf = (r: RouterCore) => r.stats().disagg.find((m) => m.model === LLM);

describe('disaggregated prefill/decode through the router', () => {
  it('remote: prefill-only to the prefill worker, first token streamed before the decode request, which carries the handle, [first], the handle seed and max_tokens', async () => {
    const { workers, llm, router, table } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk({ seed: 4242, cachedTokens: 32 })),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ]);
    const [prefill, decode] = workers as [FakeLlmWorker, FakeLlmWorker];
    const p = prompt(LONG);
    let decodeRequestsAtFirstToken = -1;
    const r = await run(llm, 'req-remote', p, 6, {
      seed: 1,
      onOutput: (o) => {
        if (decodeRequestsAtFirstToken === -1 && o.tokenIds.length > 0) decodeRequestsAtFirstToken = decode.received.length;
      },
    });
    expect(decodeRequestsAtFirstToken).toBe(0); // the first token reached the caller before the decode request left
    expect(r.tokens).toEqual(tokensFrom(LONG, 6));
    expect(r.last).toMatchObject({ finishReason: 'length', usage: { promptTokens: LONG, completionTokens: 6, cachedTokens: 32 } }); // the prefill worker's cached figure

    expect(prefill.received).toHaveLength(1);
    const pre = prefill.received[0]!;
    expect(pre.wire).toMatchObject({ prefillOnly: true, requestId: 'req-remote', promptTokenIds: p });
    expect(pre.wire.sampling).toMatchObject({ max_tokens: 6, seed: 1 });
    expect(pre.wire.kvTransfer).toBeUndefined();
    expect(decode.received).toHaveLength(1);
    const dec = decode.received[0]!;
    expect(dec.envelopeId).toBe(pre.envelopeId); // the same envelope id on both sides
    expect(dec.wire.prefillOnly).toBeUndefined();
    expect(dec.wire.promptTokenIds).toEqual(p);
    expect(dec.wire.outputTokenIds).toEqual([tokenAt(LONG)]);
    expect(dec.wire.kvTransfer).toMatchObject({ instanceId: prefill.instanceId, seed: 4242, blockHashes: expect.any(Array) });
    expect(dec.wire.sampling).toMatchObject({ max_tokens: 6, seed: 4242, temperature: 0.7 });
    expect(dec.wire.sampling['stop']).toBeUndefined();

    expect(disaggOf(router)).toEqual({ model: LLM, paths: { remote: 1, local: 0, fallback: 0 }, localReasons: {} });
    expect(router.stats().kvTransferSeconds).toMatchObject({ count: 1, sum: 0.004 });
    // the prefill worker's reservation and the decode worker's were both released
    await waitFor(async () => (await table.loads(Date.now())).size === 0, 2000, 'every reservation released');
  });

  it('local decisions follow the thresholds: short uncached prompt, max_tokens 1, a saturated prefill pool; each counted with its reason', async () => {
    const { workers, llm, router, table } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ], { maxPrefillQueueTokens: 500 });
    const [prefill, decode] = workers as [FakeLlmWorker, FakeLlmWorker];

    expect((await run(llm, 'short', prompt(SHORT), 3)).tokens).toEqual(tokensFrom(SHORT, 3));
    expect((await run(llm, 'edge', prompt(MIN_REMOTE - 1), 3)).tokens).toEqual(tokensFrom(MIN_REMOTE - 1, 3));
    expect((await run(llm, 'one', prompt(LONG), 1)).tokens).toEqual(tokensFrom(LONG, 1));
    expect(prefill.received).toHaveLength(0);
    // exactly at the threshold: remote
    await run(llm, 'at', prompt(MIN_REMOTE, 2), 3);
    expect(prefill.received).toHaveLength(1);

    // 500 tokens queued for prefill on the prefill worker (another request, not yet past its first token)
    await table.selectAndReserve({ requestId: 'other', blockHashes: [], promptTokens: 500, blockSize: 16, candidates: [`${prefill.instanceId}/${LLM}`], overlapWeight: 1, temperature: 0, random: 0, now: Date.now() });
    expect((await run(llm, 'busy', prompt(LONG, 3), 3)).tokens).toEqual(tokensFrom(LONG, 3));
    expect(prefill.received).toHaveLength(1);
    await table.release('other');
    await run(llm, 'free', prompt(LONG, 4), 3);
    expect(prefill.received).toHaveLength(2);

    const local = decode.wholes().filter((r) => r.wire.kvTransfer === undefined);
    expect(local.map((r) => r.wire.requestId)).toEqual(['short', 'edge', 'one', 'busy']);
    for (const r of local) expect(r.wire.outputTokenIds).toBeUndefined();
    expect(disaggOf(router)).toEqual({ model: LLM, paths: { remote: 2, local: 4, fallback: 0 }, localReasons: { prefill_saturated: 1, short_prompt: 2, single_token: 1 } });
  });

  it('a prompt mostly cached on the decode worker stays local (uncached = prompt − overlap × block size)', async () => {
    const { workers, llm, router, table } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ]);
    const [prefill, decode] = workers as [FakeLlmWorker, FakeLlmWorker];
    const p = prompt(LONG, 9);
    // the decode worker holds the prompt's first 4 blocks (64 tokens): 36 uncached < 64
    const hashes = hashTokenBlocks(p, 16);
    const blocks = hashes.sequenceHashes.slice(0, 4).map((h, i) => ({ block_hash: h, tokens_hash: hashes.localHashes[i]! }));
    await table.applyEvents(`${decode.instanceId}/${LLM}`, [{ event_id: 0, data: { type: 'stored', parent_hash: null, blocks } }]);
    await run(llm, 'cached', p, 3);
    expect(decode.received).toHaveLength(1);
    expect(prefill.received).toHaveLength(0);
    expect(disaggOf(router)!.localReasons).toEqual({ short_prompt: 1 });
  });

  const FAILURES: Array<[string, () => Behaviour, { serveGenerate?: boolean }]> = [
    ['is dead (no responders)', () => prefillOk(), { serveGenerate: false }],
    ['answers an error frame', () => fail(internal('prefill exploded')), {}],
    ['never answers (timeout)', () => hang(), {}],
    ['dies mid-request (stream cut)', () => crash(), {}],
    ['ends its prefill with two tokens', () => async function* () { yield { tokenIds: [5, 6], finishReason: 'length', stopReason: null }; }, {}],
    ['ends its prefill aborted', () => async function* () { yield { tokenIds: [], finishReason: 'abort', stopReason: null }; }, {}],
    [
      'sends a malformed handle',
      () => async function* (request, context, worker) {
        for await (const out of prefillOk()(request, context, worker)) yield { ...out, kvTransfer: { ...out.kvTransfer!, blockHashes: ['not-a-hash'] } };
      },
      {},
    ],
  ];
  it.each(FAILURES)('a prefill worker that %s: retried once on another, then prefilled locally; the client sees no error', async (what, behaviour, options) => {
    const { workers, llm, router, table } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', behaviour(), options),
      await FakeLlmWorker.start(cluster!, card, 'prefill', behaviour(), options),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ], { prefillTimeoutMs: 200 });
    const [p1, p2, decode] = workers as [FakeLlmWorker, FakeLlmWorker, FakeLlmWorker];
    const t0 = Date.now();
    const r = await run(llm, 'pf', prompt(LONG), 4);
    expect(r.tokens).toEqual(tokensFrom(LONG, 4));
    expect(r.last).toMatchObject({ finishReason: 'length', usage: { promptTokens: LONG, completionTokens: 4 } });
    expect(Date.now() - t0).toBeLessThan(3000);
    // both prefill workers tried once (a dead one receives nothing), then the decode worker prefilled itself
    const served = options.serveGenerate !== false;
    expect([p1.received.length, p2.received.length]).toEqual(served ? [1, 1] : [0, 0]);
    // the router gave up on each prefill request: they were cancelled (a timed-out one by its timeout)
    if (what.includes('timeout')) for (const w of [...p1.received, ...p2.received]) expect(w.signal.aborted).toBe(true);
    expect(decode.received).toHaveLength(1);
    expect(decode.received[0]!.wire.kvTransfer).toBeUndefined();
    expect(decode.received[0]!.wire.outputTokenIds).toBeUndefined();
    expect(disaggOf(router)).toEqual({ model: LLM, paths: { remote: 0, local: 1, fallback: 0 }, localReasons: { prefill_failed: 1 } });
    expect(router.stats().errors).toBe(0);
    await waitFor(async () => (await table.loads(Date.now())).size === 0, 2000, 'every reservation released');
  });

  it('the first prefill worker fails, the retry on another succeeds: remote', async () => {
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk(), { serveGenerate: false }),
      await FakeLlmWorker.start(cluster!, card, 'prefill', fail(internal('prefill exploded'))),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ]);
    const [dead, bad, decode] = workers as [FakeLlmWorker, FakeLlmWorker, FakeLlmWorker];
    bad.behaviour = prefillOk({ seed: 9 });
    // whichever is tried first, at most one fails (the dead one), then the other serves it
    const r = await run(llm, 'retry', prompt(LONG), 3);
    expect(r.tokens).toEqual(tokensFrom(LONG, 3));
    expect(bad.prefills()).toHaveLength(1);
    expect(dead.received).toHaveLength(0);
    expect(decode.received[0]!.wire.kvTransfer?.instanceId).toBe(bad.instanceId);
    expect(disaggOf(router)!.paths).toEqual({ remote: 1, local: 0, fallback: 0 });
  });

  it('no prefill worker (decode workers only): aggregated, logged once, counted local', async () => {
    const logger = recordingLogger();
    const { workers, llm, router } = await setup(async (card) => [await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk())], {}, logger);
    for (let i = 0; i < 3; i++) expect((await run(llm, `np-${i}`, prompt(LONG, i), 3)).tokens).toEqual(tokensFrom(LONG, 3));
    expect(workers[0]!.received.every((r) => r.wire.kvTransfer === undefined && r.wire.prefillOnly === undefined)).toBe(true);
    expect(logger.warnings.filter((w) => w.includes('no usable prefill worker'))).toHaveLength(1);
    expect(disaggOf(router)).toEqual({ model: LLM, paths: { remote: 0, local: 3, fallback: 0 }, localReasons: { no_prefill_workers: 3 } });
  });

  it('an aggregated-only model is not disaggregated: nothing counted', async () => {
    const { llm, router } = await setup(async (card) => [await FakeLlmWorker.start(cluster!, card, undefined, decodeOk())]);
    await run(llm, 'agg', prompt(LONG), 2);
    expect(router.stats().disagg).toEqual([]);
  });

  it("the decode worker's import fell back (kvImport.fallback), or the prefill gave no usable handle: counted fallback, the stream is whole", async () => {
    const logger = recordingLogger();
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ kvImport: { pulledBlocks: 0, cachedBlocks: 0, bytes: 0, ms: 1, fallback: 'KV layout mismatch: dtype is fp16 on the prefill worker and fp32 here' } })),
    ], {}, logger);
    const [prefill, decode] = workers as [FakeLlmWorker, FakeLlmWorker];
    expect((await run(llm, 'fb', prompt(LONG), 4)).tokens).toEqual(tokensFrom(LONG, 4));
    expect(logger.warnings.some((w) => w.includes('did not use the transferred KV blocks'))).toBe(true);
    prefill.behaviour = prefillOk({ handle: false });
    expect((await run(llm, 'nohandle', prompt(LONG, 2), 4)).tokens).toEqual(tokensFrom(LONG, 4));
    // without a handle the decode worker still continues after the first token
    expect(decode.received[1]!.wire).toMatchObject({ outputTokenIds: [tokenAt(LONG)] });
    expect(decode.received[1]!.wire.kvTransfer).toBeUndefined();
    // a handle that points decode workers anywhere but the prefill worker's own advertised address is not handed on
    prefill.behaviour = prefillOk({ address: '169.254.169.254:80' });
    expect((await run(llm, 'elsewhere', prompt(LONG, 3), 4)).tokens).toEqual(tokensFrom(LONG, 4));
    prefill.behaviour = prefillOk({ instanceId: decode.instanceId });
    expect((await run(llm, 'other-instance', prompt(LONG, 4), 4)).tokens).toEqual(tokensFrom(LONG, 4));
    expect(decode.received.slice(2).map((r) => r.wire.kvTransfer)).toEqual([undefined, undefined]);
    expect(logger.warnings.some((w) => w.includes('not the one on its card (w'))).toBe(true);
    expect(logger.warnings.some((w) => w.includes(`names instance ${decode.instanceId}, not its own`))).toBe(true);
    expect(disaggOf(router)!.paths).toEqual({ remote: 0, local: 0, fallback: 4 });
    expect(router.stats().kvTransferSeconds.count).toBe(0);
  });

  it('a prefill that stops at its first token (EOS) ends the request there: no decode request', async () => {
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk({ finish: 'stop', cachedTokens: 16 })),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ]);
    const r = await run(llm, 'eos', prompt(LONG), 8);
    expect(r.tokens).toEqual([tokenAt(LONG)]);
    expect(r.last).toMatchObject({ finishReason: 'stop', stopReason: 2, usage: { promptTokens: LONG, completionTokens: 1, cachedTokens: 16 } });
    expect(workers[1]!.received).toHaveLength(0);
    expect(disaggOf(router)!.paths.remote).toBe(1);
  });

  it('a caller abort during the prefill aborts the prefill request; nothing goes to the decode worker', async () => {
    const { workers, llm } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', hang()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk()),
    ]);
    const [prefill, decode] = workers as [FakeLlmWorker, FakeLlmWorker];
    const abort = new AbortController();
    const pending = run(llm, 'ab', prompt(LONG), 5, { signal: abort.signal });
    await waitFor(() => prefill.received.length === 1, 5000, 'the prefill request');
    abort.abort();
    const r = await pending;
    expect(r.last.finishReason).toBe('abort');
    expect(r.tokens).toEqual([]);
    await waitFor(() => prefill.received[0]!.signal.aborted, 2000, 'the prefill request cancelled');
    expect(decode.received).toHaveLength(0);
  });

  it('a caller abort during decode aborts the decode request', async () => {
    const { workers, llm } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ delayMs: 20 })),
    ]);
    const decode = workers[1]!;
    const abort = new AbortController();
    const r = await run(llm, 'ab2', prompt(LONG), 50, { signal: abort.signal, onOutput: (o) => o.tokenIds.length > 0 && decode.received.length > 0 && abort.abort() });
    expect(r.last.finishReason).toBe('abort');
    await waitFor(() => decode.received[0]!.signal.aborted, 2000, 'the decode request cancelled');
  });

  it('migration of the decode stream: the next decode worker gets outputTokenIds = every token so far, the handle seed, max_tokens unchanged, no handle', async () => {
    const crashes = { left: 1 }; // whichever decode worker takes it first dies after 3 tokens
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk({ seed: 31337 })),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ crashAfter: 3, crashes })),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ crashAfter: 3, crashes })),
    ]);
    const [, d1, d2] = workers as [FakeLlmWorker, FakeLlmWorker, FakeLlmWorker];
    const r = await run(llm, 'mig', prompt(LONG), 10);
    expect(r.tokens).toEqual(tokensFrom(LONG, 10)); // every token once, in order
    expect(r.last).toMatchObject({ finishReason: 'length', usage: { promptTokens: LONG, completionTokens: 10 } });
    const first = [...d1.received, ...d2.received].find((x) => x.wire.kvTransfer !== undefined)!;
    const second = [...d1.received, ...d2.received].find((x) => x.wire.kvTransfer === undefined)!;
    expect(first.wire.outputTokenIds).toEqual([tokenAt(LONG)]);
    expect(second.wire.promptTokenIds).toEqual(prompt(LONG));
    expect(second.wire.outputTokenIds).toEqual(tokensFrom(LONG, 4)); // the first token + 3 decoded
    expect(second.wire.sampling).toMatchObject({ max_tokens: 10, seed: 31337 });
    expect(second.envelopeId).toBe(first.envelopeId);
    expect(router.stats().migrations.ongoing_request).toBe(1);
    expect(disaggOf(router)!.paths).toEqual({ remote: 1, local: 0, fallback: 0 });
  });

  it('a decode attempt with the handle that dies before its first output: counted fallback, migrated without the handle', async () => {
    const crashes = { left: 1 };
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ crashAfter: 0, crashes })),
      await FakeLlmWorker.start(cluster!, card, 'decode', decodeOk({ crashAfter: 0, crashes })),
    ]);
    const r = await run(llm, 'mig0', prompt(LONG), 5);
    expect(r.tokens).toEqual(tokensFrom(LONG, 5));
    const all = [...workers[1]!.received, ...workers[2]!.received];
    expect(all).toHaveLength(2);
    const [withHandle, after] = [all.find((x) => x.wire.kvTransfer !== undefined)!, all.find((x) => x.wire.kvTransfer === undefined)!];
    expect(withHandle.wire.outputTokenIds).toEqual([tokenAt(LONG)]);
    expect(after.wire.outputTokenIds).toEqual([tokenAt(LONG)]);
    expect(disaggOf(router)!.paths).toEqual({ remote: 0, local: 0, fallback: 1 });
  });
});

describe('prefill-role instances never take whole requests', () => {
  it('generate (OpenAI path), KServe text_input and forwarded KServe requests all avoid the prefill worker', async () => {
    const { workers, llm, router } = await setup(async (card) => [
      await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk()),
      await FakeLlmWorker.start(cluster!, card, undefined, decodeOk()),
    ]);
    const [prefill, agg] = workers as [FakeLlmWorker, FakeLlmWorker];
    for (let i = 0; i < 5; i++) await run(llm, `g${i}`, prompt(SHORT, i), 2);
    // KServe generate through the router's LlmInstance (text_input): routed by RoutedLlmEndpoint
    const text = (s: string) => ({ name: 'text_input', datatype: 'BYTES' as const, shape: [1], data: serializeBytesElements([new TextEncoder().encode(s)]), parameters: {} });
    for (let i = 0; i < 3; i++) {
      await router.engine.infer({ id: `k${i}`, modelName: LLM, modelVersion: undefined, parameters: { max_tokens: 2 }, inputs: [text(`hello ${i}`)], outputs: [] });
    }
    // a request the router cannot parse is forwarded to a worker's infer: never the prefill worker's
    for (let i = 0; i < 4; i++) {
      await router.engine.infer({ id: `f${i}`, modelName: LLM, modelVersion: undefined, parameters: {}, inputs: [{ name: 'other', datatype: 'INT32', shape: [1], data: new Uint8Array(4), parameters: {} }], outputs: [] }).catch(() => {});
    }
    expect(prefill.received).toHaveLength(0);
    expect(prefill.infers).toHaveLength(0);
    expect(agg.infers).toHaveLength(4);
    expect(agg.wholes().length).toBe(8);
  });

  it('a model served only by prefill workers is unavailable, with a message that says so', async () => {
    const { llm, router } = await setup(async (card) => [await FakeLlmWorker.start(cluster!, card, 'prefill', prefillOk())]);
    const err = await run(llm, 'x', prompt(SHORT), 2).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable', message: expect.stringContaining(`model '${LLM}' is served only by prefill workers (1 registered)`) });
    const forwarded = await router.engine
      .infer({ id: 'f', modelName: LLM, modelVersion: undefined, parameters: {}, inputs: [{ name: 'other', datatype: 'INT32', shape: [1], data: new Uint8Array(4), parameters: {} }], outputs: [] })
      .catch((e: unknown) => e);
    expect(forwarded).toMatchObject({ code: 'unavailable', message: expect.stringContaining('served only by prefill workers') });
  });
});

describe('router core options', () => {
  it('refuses bad disaggregation options', async () => {
    cluster = new MockCluster();
    const roles = cluster.routerRoles();
    const start = (disagg: Partial<DisaggOptions>) => startRouterCore({ ...roles, routingTable: new MemoryRoutingTable(), namespace: NS, disagg });
    await expect(start({ minRemoteTokens: -1 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('minRemoteTokens') });
    await expect(start({ maxPrefillQueueTokens: 1.5 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('maxPrefillQueueTokens') });
    await expect(start({ prefillTimeoutMs: 0 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('prefillTimeoutMs') });
    await expect(start({ prefillTimeoutMs: 2 ** 31 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('prefillTimeoutMs') });
  });
});
