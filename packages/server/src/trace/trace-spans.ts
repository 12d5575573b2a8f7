/**
 * A finished trace as OpenTelemetry spans, the way tritonserver's opentelemetry mode shapes them:
 * a root `InferRequest` span with the front door's events (HTTP_RECV_START ... HTTP_SEND_END or the
 * GRPC_* ones, INFER_RESPONSE_COMPLETE); under it one span per request named after its model
 * (attributes `triton.model_name`, `triton.model_version`, `triton.trace_id`,
 * `triton.trace_parent_id`, `triton.request_id`; events REQUEST_START, QUEUE_START, REQUEST_END),
 * an ensemble step's span under its ensemble's; under each model span a `compute` span per
 * execution (COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END). With a client's
 * trace context the root span continues its trace under its span. Timestamps are Unix ns. Pure
 * apart from fresh random ids.
 */
import type { RequestTrace, TraceNode } from './request-trace.js';
import { newSpanId, newTraceId } from './traceparent.js';

/** OTLP/JSON `Span` (opentelemetry-proto's JSON mapping: hex ids, 64-bit integers as strings). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** SPAN_KIND_SERVER, as tritonserver starts every span. */
  kind: 2;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: OtlpAttribute[];
  events: Array<{ timeUnixNano: string; name: string }>;
  status: Record<string, never>;
}

export interface OtlpAttribute {
  key: string;
  value: { stringValue: string } | { intValue: string };
}

const REQUEST_EVENTS = new Set(['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
const COMPUTE_EVENTS = new Set(['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END']);

/** `endNs`: monotonic time the trace ended (the root span's end). */
export function traceSpans(trace: RequestTrace, endNs: bigint): OtlpSpan[] {
  const traceId = trace.parent?.traceId ?? newTraceId();
  const wall = (ns: bigint): string => String(ns + trace.wallOffsetNs);
  const span = (name: string, parentSpanId: string | undefined, startNs: bigint, spanEndNs: bigint): OtlpSpan => ({
    traceId,
    spanId: newSpanId(),
    ...(parentSpanId !== undefined ? { parentSpanId } : {}),
    name,
    kind: 2,
    startTimeUnixNano: wall(startNs),
    endTimeUnixNano: wall(spanEndNs < startNs ? startNs : spanEndNs),
    attributes: [],
    events: [],
    status: {},
  });

  const rootNode = trace.nodes[0]!;
  let rootStart = trace.startNs;
  for (const item of rootNode.items) if (item.kind === 'timestamp' && !isEngineEvent(item.name) && item.ns < rootStart) rootStart = item.ns;
  const root = span('InferRequest', trace.parent?.spanId, rootStart, endNs);
  for (const item of rootNode.items) {
    if (item.kind === 'timestamp' && !isEngineEvent(item.name)) root.events.push({ timeUnixNano: wall(item.ns), name: item.name });
  }
  const spans: OtlpSpan[] = [root];
  const modelSpans = new Map<number, OtlpSpan>();
  for (const node of [...trace.nodes].sort((a, b) => a.id - b.id)) {
    const parent = node.parentId === 0 ? root : modelSpans.get(node.parentId);
    if (parent === undefined) continue;
    const modelSpan = modelSpanOf(node, parent.spanId, endNs, span, wall);
    if (modelSpan === undefined) continue;
    modelSpans.set(node.id, modelSpan);
    spans.push(modelSpan, ...computeSpansOf(node, modelSpan.spanId, endNs, span, wall));
  }
  return spans;
}

function isEngineEvent(name: string): boolean {
  return REQUEST_EVENTS.has(name) || COMPUTE_EVENTS.has(name);
}

type SpanMaker = (name: string, parentSpanId: string | undefined, startNs: bigint, endNs: bigint) => OtlpSpan;

function modelSpanOf(node: TraceNode, parentSpanId: string, endNs: bigint, span: SpanMaker, wall: (ns: bigint) => string): OtlpSpan | undefined {
  const model = node.items.find((i) => i.kind === 'model');
  if (model === undefined || model.kind !== 'model') return undefined;
  const stamps = node.items.filter((i): i is Extract<typeof i, { kind: 'timestamp' }> => i.kind === 'timestamp' && REQUEST_EVENTS.has(i.name));
  const start = stamps.find((s) => s.name === 'REQUEST_START')?.ns ?? stamps[0]?.ns ?? endNs;
  const end = stamps.find((s) => s.name === 'REQUEST_END')?.ns ?? endNs;
  const s = span(model.modelName, parentSpanId, start, end);
  s.attributes.push(
    { key: 'triton.model_name', value: { stringValue: model.modelName } },
    { key: 'triton.model_version', value: { intValue: String(model.modelVersion) } },
    { key: 'triton.trace_id', value: { intValue: String(node.id) } },
    { key: 'triton.trace_parent_id', value: { intValue: String(node.parentId) } },
  );
  if (model.requestId !== '') s.attributes.push({ key: 'triton.request_id', value: { stringValue: model.requestId } });
  for (const stamp of stamps) s.events.push({ timeUnixNano: wall(stamp.ns), name: stamp.name });
  return s;
}

function computeSpansOf(node: TraceNode, parentSpanId: string, endNs: bigint, span: SpanMaker, wall: (ns: bigint) => string): OtlpSpan[] {
  const out: OtlpSpan[] = [];
  let open: OtlpSpan | undefined;
  for (const item of node.items) {
    if (item.kind !== 'timestamp' || !COMPUTE_EVENTS.has(item.name)) continue;
    if (item.name === 'COMPUTE_START' || open === undefined) {
      open = span('compute', parentSpanId, item.ns, endNs);
      out.push(open);
    }
    open.events.push({ timeUnixNano: wall(item.ns), name: item.name });
    if (item.name === 'COMPUTE_END') {
      open.endTimeUnixNano = wall(item.ns);
      open = undefined;
    }
  }
  return out;
}
