/**
 * Test support for the router's disaggregation tests: LLM worker instances scripted on the wire (memory
 * twins), with a role on their card. Each serves `generate` with a behaviour the test picks and records
 * every request it got (decoded, with its envelope id and signal), and answers `health`.
 *
 * Token model of the scripted engines: the token at sequence position p is `tokenAt(p)`; a prefill
 * samples position `prompt.length`, a decode continues at `prompt.length + outputTokenIds.length`. So a
 * disaggregated or migrated stream that hands every token on exactly once equals `tokensFrom(prompt.length, n)`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type CancelSignal, pauseUnlessAborted } from '@switchyard/common';
import { type JsonValue, type Payload, type MemoryDiscovery, type ModelCard, MemoryRequestPlane, type RequestContext, endpointAddress, instanceAddress, modelKey, modelName, namespace } from '@switchyard/runtime';
import type { WireGenerateOutput, WireGenerateRequest, WireKvImportReport, WireKvTransferHandle, WorkerRole } from '../../protocols.js';
import { decodeWireGenerateRequest } from '../../wire-codec.js';
import { LLM, type MockCluster, NS } from './mock-cluster.js';

export const tokenAt = (position: number): number => 1000 + (position % 4000);
export const tokensFrom = (position: number, n: number): number[] => Array.from({ length: n }, (_, i) => tokenAt(position + i));

/** The mocker LLM's card (tokenizer included), taken from a real worker that is then closed. */
export async function llmCard(cluster: MockCluster): Promise<ModelCard> {
  const real = await cluster.addWorker();
  const card = cluster.store.snapshot().get(modelKey(namespace(NS), modelName(LLM), real.node.instanceId as never)) as ModelCard;
  await real.close();
  return card;
}

export interface ReceivedGenerate {
  readonly wire: WireGenerateRequest;
  readonly envelopeId: string;
  readonly signal: CancelSignal;
}

export type Behaviour = (request: WireGenerateRequest, context: RequestContext, worker: FakeLlmWorker) => AsyncIterable<WireGenerateOutput>;

export class FakeLlmWorker {
  readonly received: ReceivedGenerate[] = [];
  readonly infers: Payload[] = [];
  private constructor(
    readonly discovery: MemoryDiscovery,
    readonly plane: MemoryRequestPlane,
    readonly role: WorkerRole,
    public behaviour: Behaviour,
  ) {}

  get instanceId(): string {
    return this.discovery.instanceId;
  }

  /** Requests that were prefill-only / whole. */
  prefills(): ReceivedGenerate[] {
    return this.received.filter((r) => r.wire.prefillOnly === true);
  }
  wholes(): ReceivedGenerate[] {
    return this.received.filter((r) => r.wire.prefillOnly !== true);
  }

  /**
   * Register an instance of the LLM with `role` on its card. `serveGenerate: false`: the card is there but
   * nothing answers `generate` (a worker that died with its lease alive: no responders).
   */
  static async start(cluster: MockCluster, card: ModelCard, role: WorkerRole | undefined, behaviour: Behaviour, options: { serveGenerate?: boolean } = {}): Promise<FakeLlmWorker> {
    const discovery = cluster.store.connect();
    const plane = new MemoryRequestPlane(cluster.broker);
    const worker = new FakeLlmWorker(discovery, plane, role ?? 'aggregated', behaviour);
    if (options.serveGenerate !== false) {
      await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'generate'), discovery.instanceId), async function* (payload, context) {
        const wire = decodeWireGenerateRequest(payload);
        worker.received.push({ wire, envelopeId: context.requestId, signal: context.signal });
        for await (const out of worker.behaviour(wire, context, worker)) yield out as unknown as JsonValue;
      });
      await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'infer'), discovery.instanceId), async function* (payload) {
        worker.infers.push(payload);
        throw new Error('scripted worker: infer not served');
      });
    }
    await plane.serve(instanceAddress(endpointAddress(NS, 'backend', 'health'), discovery.instanceId), async function* () {
      yield { state: 'serving' };
    });
    const metadata = { ...(card.metadata as Record<string, unknown>) };
    if (role !== undefined) metadata['role'] = role;
    metadata['kvTransfer'] = { address: transferAddress(discovery.instanceId), layout: LAYOUT };
    await discovery.registerModel({ ...card, instanceId: discovery.instanceId, metadata } as ModelCard);
    return worker;
  }
}

const LAYOUT = { modelId: 'mock', engine: 'mocker', dtype: 'fp16', numLayers: 2, numKvHeads: 2, headDim: 8, blockSize: 16, bytesPerBlock: 1024 } as const;
/** The KV transfer address a scripted worker advertises on its card. */
export const transferAddress = (instanceId: string): string => `w${instanceId.slice(-4)}:7001`;

/** The handle a scripted prefill worker hands out for `prompt` (block size 16: its full blocks). */
export function handleFor(worker: FakeLlmWorker, prompt: readonly number[], seed: number): WireKvTransferHandle {
  const blocks = Math.floor(prompt.length / 16);
  return {
    address: transferAddress(worker.instanceId),
    instanceId: worker.instanceId,
    leaseId: `lease-${worker.received.length}`,
    blockHashes: Array.from({ length: blocks }, (_, i) => i.toString(16).padStart(16, '0')),
    layout: LAYOUT,
    seed,
  };
}

/** A prefill worker that works: the first token, finish 'length', a handle (seed `seed`), `cachedTokens` in its usage. */
export function prefillOk(options: { seed?: number; cachedTokens?: number; handle?: boolean; finish?: 'length' | 'stop'; delayMs?: number; address?: string; instanceId?: string } = {}): Behaviour {
  return async function* (request, _context, worker) {
    if (options.delayMs !== undefined) await sleep(options.delayMs);
    const finish = options.finish ?? 'length';
    const usage = { promptTokens: request.promptTokenIds.length, completionTokens: 1, cachedTokens: options.cachedTokens ?? 0 };
    const handle = { ...handleFor(worker, request.promptTokenIds, options.seed ?? 77), ...(options.address !== undefined ? { address: options.address } : {}), ...(options.instanceId !== undefined ? { instanceId: options.instanceId } : {}) };
    const kvTransfer = finish === 'length' && options.handle !== false ? { kvTransfer: handle } : {};
    yield { tokenIds: [tokenAt(request.promptTokenIds.length)], finishReason: finish, stopReason: finish === 'stop' ? 2 : null, usage, ...kvTransfer };
  };
}

/**
 * A decode (or aggregated) worker: one token per output from position prompt + outputTokenIds, up to
 * `max_tokens` (which counts outputTokenIds); the first output of a request with a handle carries
 * `kvImport`. `crashAfter`: after that many outputs the worker's process dies (stream cut, no final
 * marker), as long as the shared `crashes` budget lasts (default: always) — a turn of the event loop
 * after the last one, which has left by then (a process that dies in the turn it produced a frame
 * loses it: the request plane sends a turn's frames at its end).
 */
export function decodeOk(options: { kvImport?: WireKvImportReport; delayMs?: number; crashAfter?: number; crashes?: { left: number } } = {}): Behaviour {
  return async function* (request, context, worker) {
    const prior = request.outputTokenIds ?? [];
    const max = request.sampling['max_tokens'] as number;
    const start = request.promptTokenIds.length + prior.length;
    const n = max - prior.length;
    for (let i = 0; i < n; i++) {
      if (options.delayMs !== undefined) await pauseUnlessAborted(options.delayMs, context.signal);
      if (context.signal.aborted) {
        yield { tokenIds: [], finishReason: 'abort', stopReason: null };
        return;
      }
      if (options.crashAfter !== undefined && i === options.crashAfter && (options.crashes === undefined || options.crashes.left-- > 0)) {
        await new Promise((resolve) => setImmediate(resolve));
        worker.plane.crash();
        await pauseUnlessAborted(10_000, context.signal);
        return;
      }
      const last = i === n - 1;
      yield {
        tokenIds: [tokenAt(start + i)],
        finishReason: last ? 'length' : null,
        stopReason: null,
        ...(i === 0 && request.kvTransfer !== undefined ? { kvImport: options.kvImport ?? { pulledBlocks: request.kvTransfer.blockHashes.length, cachedBlocks: 0, bytes: 1024 * request.kvTransfer.blockHashes.length, ms: 4 } } : {}),
        ...(last ? { usage: { promptTokens: request.promptTokenIds.length, completionTokens: max, cachedTokens: 5 } } : {}),
      };
    }
  };
}

/** Never answers until the request is aborted (a wedged worker); then ends. */
export function hang(): Behaviour {
  return async function* (_request, context) {
    await new Promise<void>((resolve) => context.signal.addEventListener('abort', () => resolve(), { once: true }));
  };
}

/** Answers with an error frame. */
export function fail(error: Error): Behaviour {
  // eslint-disable-next-line require-yield
  return async function* () {
    throw error;
  };
}

/** The worker process dies with the request in flight (its stream ends without a final marker). */
export function crash(): Behaviour {
  // eslint-disable-next-line require-yield
  return async function* (_request, context, worker) {
    worker.plane.crash();
    await pauseUnlessAborted(10_000, context.signal);
  };
}

/**
 * A worker whose model always answers `reply` (token ids), whatever the prompt: output token n is
 * `reply[n]`, continuing after `outputTokenIds` as a real engine does; after the last one it
 * finishes 'stop' (the model's EOS). `crashAfter`: after that many outputs of one attempt the
 * process dies (stream cut; a turn after the last output, as in decodeOk), as long as the shared
 * `crashes` budget lasts.
 */
export function scriptedReply(reply: readonly number[], options: { crashAfter?: number; crashes?: { left: number } } = {}): Behaviour {
  return async function* (request, context, worker) {
    const prior = request.outputTokenIds ?? [];
    for (let n = prior.length, i = 0; n < reply.length; n++, i++) {
      await sleep(1);
      if (context.signal.aborted) {
        yield { tokenIds: [], finishReason: 'abort', stopReason: null };
        return;
      }
      if (options.crashAfter !== undefined && i === options.crashAfter && (options.crashes === undefined || options.crashes.left-- > 0)) {
        await new Promise((resolve) => setImmediate(resolve));
        worker.plane.crash();
        await pauseUnlessAborted(10_000, context.signal);
        return;
      }
      const last = n === reply.length - 1;
      yield {
        tokenIds: [reply[n] as number],
        finishReason: last ? 'stop' : null,
        stopReason: null,
        ...(last ? { usage: { promptTokens: request.promptTokenIds.length, completionTokens: reply.length, cachedTokens: 0 } } : {}),
      };
    }
  };
}
