/**
 * Header forwarding (tritonserver's `--http-header-forward-pattern` / `--grpc-header-forward-pattern`):
 * request headers (HTTP) or metadata (gRPC) whose names match the operator's regular expression
 * reach the model as string request parameters, parameter name = header name as received, value =
 * header value. As in Triton the match is RE2's partial match, case-insensitive (`(?i)` in front).
 *
 * The pattern comes from the operator, the names from any client, so:
 * - it is compiled with RE2's syntax and matched by a linear-time engine (re2js): no pattern can
 *   backtrack exponentially on a crafted name (Triton uses RE2 for the same reason), and patterns
 *   RE2 refuses (backreferences, lookaround) are refused here too;
 * - only names up to `MAX_FORWARDED_NAME_LENGTH` characters are tested at all, and a request may
 *   forward at most `MAX_FORWARDED_HEADERS` of them (more: INVALID_ARG); the doors' own limits on
 *   header / metadata size bound the values;
 * - names the server reads as request controls (`sequence_id`, `sequence_start`, `sequence_end`,
 *   `priority`, `timeout`, `binary_data_output`, anything `triton_`) are never forwarded: in Triton
 *   forwarded headers are plain parameters a model sees, never controls of the request, and here
 *   controls and parameters share one map. A forwarded header replaces a body parameter of the same
 *   name (Triton appends it after the body's, so the model sees the header's last).
 */
import { RE2JS } from 're2js';
import { invalidArgument } from '@switchyard/common';
import type { Parameters } from '@switchyard/kserve';

/** Longest pattern accepted (a command-line value, but the compiled program is kept for the server's life). */
export const MAX_FORWARD_PATTERN_LENGTH = 4096;
/** Longer header names are never forwarded (nor matched). */
export const MAX_FORWARDED_NAME_LENGTH = 256;
/** Most headers one request may forward. */
export const MAX_FORWARDED_HEADERS = 64;

/** Names never forwarded: the request controls, and `__proto__` (a parameter map is a plain object). */
const CONTROL_PARAMETERS = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output', '__proto__']);

export interface HeaderForwardPattern {
  /** The pattern as the operator gave it. */
  readonly source: string;
  /** Whether a header of this name is forwarded (partial, case-insensitive match; control names never). */
  forwards(name: string): boolean;
}

/** Compile an operator's pattern. Throws (an Error with RE2's reason) when RE2 does not accept it. */
export function compileHeaderForwardPattern(source: string): HeaderForwardPattern {
  if (source.length > MAX_FORWARD_PATTERN_LENGTH) throw new Error(`the pattern is longer than ${MAX_FORWARD_PATTERN_LENGTH} characters`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(`(?i)${source}`);
  } catch (e) {
    throw new Error(`not a valid RE2 regular expression: ${e instanceof Error ? e.message : String(e)}`);
  }
  return {
    source,
    forwards(name: string): boolean {
      if (name.length === 0 || name.length > MAX_FORWARDED_NAME_LENGTH) return false;
      const lower = name.toLowerCase();
      if (CONTROL_PARAMETERS.has(lower) || lower.startsWith('triton_')) return false;
      return re.matcher(name).find();
    },
  };
}

/**
 * Add the forwarded headers of one request to its `parameters` (in place). `headers` are
 * name/value pairs in arrival order (a repeated header is forwarded once per value, the last one
 * winning). Throws INVALID_ARG when more than MAX_FORWARDED_HEADERS would be forwarded.
 */
export function forwardHeaders(pattern: HeaderForwardPattern | undefined, headers: Iterable<readonly [string, string]>, parameters: Parameters): void {
  if (pattern === undefined) return;
  let count = 0;
  for (const [name, value] of headers) {
    if (!pattern.forwards(name)) continue;
    if (++count > MAX_FORWARDED_HEADERS) {
      throw invalidArgument(`at most ${MAX_FORWARDED_HEADERS} request headers may be forwarded as parameters`);
    }
    parameters[name] = value;
  }
}

/** Node's `rawHeaders` (name, value, name, value, ...) as pairs, names as the client sent them. */
export function* rawHeaderPairs(raw: readonly string[]): Iterable<readonly [string, string]> {
  for (let i = 0; i + 1 < raw.length; i += 2) yield [raw[i]!, raw[i + 1]!];
}
