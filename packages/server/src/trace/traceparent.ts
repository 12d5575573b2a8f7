/**
 * W3C Trace Context (`traceparent: 00-<trace-id>-<parent-id>-<flags>`): the context a client
 * propagates so the worker's spans join its trace. Pure.
 */
import { randomBytes } from 'node:crypto';

export interface TraceParent {
  /** 32 lower-case hex digits, not all zero. */
  traceId: string;
  /** 16 lower-case hex digits, not all zero: the client's span, the parent of the worker's root span. */
  spanId: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * Parse a `traceparent` header value (or the first of several). Anything invalid is no context
 * (the spec: start a new trace), never an error: version `ff`, all-zero ids, upper-case hex, or
 * version 00 with trailing data. Values longer than the spec allows for future versions are refused.
 */
export function parseTraceParent(value: string | readonly string[] | undefined): TraceParent | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' || text.length > 512) return undefined;
  const m = TRACEPARENT.exec(text.trim());
  if (m === null) return undefined;
  const [, version, traceId, spanId, , rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId };
}

export function newTraceId(): string {
  return nonZeroHex(16);
}

export function newSpanId(): string {
  return nonZeroHex(8);
}

function nonZeroHex(bytes: number): string {
  for (;;) {
    const hex = randomBytes(bytes).toString('hex');
    if (!/^0+$/.test(hex)) return hex;
  }
}
