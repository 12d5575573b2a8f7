/**
 * One sampled request's trace (Triton's `TraceManager::Trace`): the front door's timestamps and
 * what the engine reports for the request and every request it spawns (ensemble steps), each under
 * its own trace id with its parent's id. The front door ends it after sending the response; the
 * trace manager then writes it (triton mode) or turns it into spans (opentelemetry mode).
 *
 * Bounded: at most `MAX_TRACE_ITEMS` items and `MAX_TRACE_TENSOR_CHARS` characters of tensor data
 * per trace, and the trace manager's process-wide tensor text budget; past them items are dropped
 * and tensor data left empty (`truncated` counts them). Anything reported after `end()` is ignored.
 */
import type { InferTensor } from '@switchyard/kserve';
import type { InferenceTrace, TraceActivity, TraceTensorActivity } from '@switchyard/engine';
import type { TraceLevels } from './trace-config.js';
import { renderTensorData } from './tensor-text.js';
import type { TraceParent } from './traceparent.js';

/** Most items (timestamps, model entries, tensors) one trace keeps, children included. */
export const MAX_TRACE_ITEMS = 8192;
/** Most characters of rendered tensor data one trace keeps. */
export const MAX_TRACE_TENSOR_CHARS = 16 * 1024 * 1024;

export interface TracedTensor {
  name: string;
  data: string;
  shape: string;
  dtype: string;
}

/** One thing recorded under a trace id, in arrival order (Triton writes them in that order). */
export type TraceItem =
  | { kind: 'timestamp'; name: string; ns: bigint }
  | { kind: 'model'; modelName: string; modelVersion: number; requestId: string }
  | { kind: 'tensor'; activity: TraceTensorActivity; tensor: TracedTensor };

/** Everything recorded under one trace id: the root request, or a request it spawned. */
export interface TraceNode {
  readonly id: number;
  /** 0 for the root. */
  readonly parentId: number;
  readonly items: TraceItem[];
}

export interface RequestTraceOptions {
  levels: TraceLevels;
  /** Hands out Triton trace ids (process-wide, from 1). */
  nextId: () => number;
  /** A client's context (opentelemetry mode): the spans join its trace. */
  parent?: TraceParent;
  /** Called once, by `end()`. */
  onEnd: (trace: RequestTrace) => void;
  /** Tensor text budget shared by every trace in flight; this trace gives its share back at `end()`. */
  tensorChars?: { held: number; max: number };
}

export class RequestTrace {
  readonly nodes: TraceNode[] = [];
  readonly parent: TraceParent | undefined;
  /** Wall-clock ns minus monotonic ns when the trace began: turns `hrtime` stamps into Unix time (opentelemetry). */
  readonly wallOffsetNs: bigint;
  /** Monotonic ns the trace was sampled at. */
  readonly startNs: bigint;
  /** Items dropped or tensor data emptied for the bounds. */
  truncated = 0;
  readonly #timestamps: boolean;
  readonly #tensors: boolean;
  readonly #options: RequestTraceOptions;
  #items = 0;
  #tensorChars = 0;
  #ended = false;
  readonly root: InferenceTrace;

  constructor(options: RequestTraceOptions) {
    this.#options = options;
    this.parent = options.parent;
    this.#timestamps = options.levels.includes('TIMESTAMPS');
    this.#tensors = options.levels.includes('TENSORS');
    this.startNs = process.hrtime.bigint();
    this.wallOffsetNs = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) - process.hrtime.bigint();
    this.root = this.#node(0);
  }

  get rootId(): number {
    return this.nodes[0]!.id;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** A front-door timestamp (HTTP_RECV_START, GRPC_SEND_END, ...), on the root id; TIMESTAMPS level only. */
  capture(name: string, ns: bigint): void {
    if (this.#timestamps) this.#push(this.nodes[0]!, { kind: 'timestamp', name, ns });
  }

  /** The front door is done with the request: hand the trace over (once). */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#options.tensorChars !== undefined) this.#options.tensorChars.held -= this.#tensorChars;
    this.#options.onEnd(this);
  }

  #push(node: TraceNode, item: TraceItem): void {
    if (this.#ended) return;
    if (this.#items >= MAX_TRACE_ITEMS) {
      this.truncated++;
      return;
    }
    this.#items++;
    node.items.push(item);
  }

  #node(parentId: number): InferenceTrace {
    const node: TraceNode = { id: this.#options.nextId(), parentId, items: [] };
    this.nodes.push(node);
    return {
      wantsTensors: this.#tensors,
      start: (modelName: string, modelVersion: number, requestId: string) => {
        // Triton writes the model entry with REQUEST_START, at TIMESTAMPS level.
        if (this.#timestamps) this.#push(node, { kind: 'model', modelName, modelVersion, requestId });
      },
      activity: (activity: TraceActivity, ns: bigint) => {
        if (this.#timestamps) this.#push(node, { kind: 'timestamp', name: activity, ns });
      },
      tensor: (activity: TraceTensorActivity, tensor: InferTensor) => {
        if (!this.#tensors || this.#ended) return;
        const shared = this.#options.tensorChars;
        const room = Math.min(MAX_TRACE_TENSOR_CHARS - this.#tensorChars, shared === undefined ? Infinity : shared.max - shared.held);
        let data = renderTensorData(tensor, room);
        if (data === undefined) {
          this.truncated++;
          data = '';
        }
        this.#tensorChars += data.length;
        if (shared !== undefined) shared.held += data.length;
        this.#push(node, { kind: 'tensor', activity, tensor: { name: tensor.name, data, shape: tensor.shape.join(','), dtype: tensor.datatype } });
      },
      child: () => (this.#ended || this.nodes.length >= MAX_TRACE_ITEMS ? NO_TRACE : this.#node(node.id)),
    };
  }
}

/** A trace that records nothing: what a spawned request gets once its trace is full or over. */
const NO_TRACE: InferenceTrace = {
  wantsTensors: false,
  start: () => {},
  activity: () => {},
  tensor: () => {},
  child: () => NO_TRACE,
};
