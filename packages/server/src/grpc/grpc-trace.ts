/** The W3C trace context a gRPC client propagates in its call metadata (`traceparent`). */
import type { Metadata } from '@grpc/grpc-js';
import { parseTraceParent, type TraceParent } from '../trace/traceparent.js';

export function traceParentOf(metadata: Metadata): TraceParent | undefined {
  const value = metadata.get('traceparent')[0];
  return typeof value === 'string' ? parseTraceParent(value) : undefined;
}
