/**
 * Traces: what the simulator replays. A `TraceSource` hands out requests one at a time in arrival
 * order (`next()`), so a trace of any length is replayed in bounded memory.
 *
 * Mooncake format (JSON Lines, one request per line; Dynamo's mocker and its `sin_synth` read the
 * same): `{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [ints]}`.
 * `hash_ids[i]` names the i-th `blockSize`-token block of the prompt, prefix-chained (two requests
 * that share `hash_ids[0..i]` share that prefix); `blockSize` is the trace's (Mooncake's is 512), a
 * flag of the simulator. Unknown fields are ignored.
 *
 * Handling of hostile input (each is an `invalid_argument` naming the line, unless said otherwise):
 * - a line longer than `MAX_TRACE_LINE_BYTES`, not JSON, not an object, or missing a field;
 * - a length or hash id that is not a safe integer, a length above `MAX_TRACE_TOKENS`, an input of 0
 *   tokens, an output of 0 tokens, a timestamp that is not finite, negative or above
 *   `MAX_TRACE_TIMESTAMP_MS` (30 days);
 * - more hash ids than the prompt has blocks (ceil(input_length / blockSize));
 * - a timestamp earlier than the line before's: the simulator replays in order, a trace must be
 *   sorted (`sort` it; Mooncake's are). Equal timestamps are fine.
 * Blank lines are skipped. Fewer hash ids than blocks is allowed: the rest of the prompt is the
 * request's own (never shared). Requests longer than the engine's context are not the trace's
 * problem: the simulator counts them as refused, as a worker would refuse them.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { invalidArgument } from '@switchyard/common';

/** One request of a trace. */
export interface TraceRequest {
  /** Arrival, ms from the trace's origin. */
  readonly arrivalMs: number;
  readonly inputLength: number;
  readonly outputLength: number;
  /** Prefix-chained block ids of the prompt (at most ceil(inputLength / blockSize)). */
  readonly hashIds: readonly number[];
}

/** Where the simulator's requests come from, in arrival order. */
export interface TraceSource {
  /** The next request, or `undefined` when the trace is over. Throws invalid_argument on bad input. */
  next(): TraceRequest | undefined;
  /** Release the file (if any). Idempotent. */
  close(): void;
}

export const MAX_TRACE_LINE_BYTES = 1 << 20;
/** Largest input or output length a trace line may state. */
export const MAX_TRACE_TOKENS = 10_000_000;
/**
 * 30 days in ms: the latest arrival a trace may state. The simulator steps through idle time (load
 * samples, planner intervals), so a trace's span bounds its run time; a later timestamp is refused.
 */
export const MAX_TRACE_TIMESTAMP_MS = 30 * 86_400_000;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function field(o: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(o, key) ? o[key] : undefined;
}

/** Decode one Mooncake line (already known not to be blank). `where` prefixes errors ("line 7"). */
export function parseTraceLine(line: string, blockSize: number, where: string): TraceRequest {
  if (line.length > MAX_TRACE_LINE_BYTES) throw invalidArgument(`${where}: longer than ${MAX_TRACE_LINE_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (err) {
    throw invalidArgument(`${where}: not JSON (${(err as Error).message})`);
  }
  if (!isObject(v)) throw invalidArgument(`${where}: a trace line must be a JSON object`);
  const ts = field(v, 'timestamp');
  if (typeof ts !== 'number' || !Number.isFinite(ts) || ts < 0 || ts > MAX_TRACE_TIMESTAMP_MS) {
    throw invalidArgument(`${where}: timestamp must be a number of ms in [0, ${MAX_TRACE_TIMESTAMP_MS}], got ${describe(ts)}`);
  }
  const length = (key: string): number => {
    const x = field(v as Record<string, unknown>, key);
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 1 || x > MAX_TRACE_TOKENS) {
      throw invalidArgument(`${where}: ${key} must be an integer in [1, ${MAX_TRACE_TOKENS}], got ${describe(x)}`);
    }
    return x;
  };
  const inputLength = length('input_length');
  const outputLength = length('output_length');
  const raw = field(v, 'hash_ids') ?? [];
  if (!Array.isArray(raw)) throw invalidArgument(`${where}: hash_ids must be an array of integers`);
  const blocks = Math.ceil(inputLength / blockSize);
  if (raw.length > blocks) {
    throw invalidArgument(`${where}: ${raw.length} hash_ids for ${inputLength} input tokens (at most ${blocks} blocks of ${blockSize}; is --trace-block-size right?)`);
  }
  const hashIds = raw.map((h, i) => {
    if (typeof h !== 'number' || !Number.isSafeInteger(h) || h < 0) throw invalidArgument(`${where}: hash_ids[${i}] must be a non-negative integer, got ${describe(h)}`);
    return h;
  });
  return { arrivalMs: ts, inputLength, outputLength, hashIds };
}

function describe(x: unknown): string {
  if (typeof x === 'string') return JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}…` : x);
  if (typeof x === 'number' || typeof x === 'boolean' || x === null || x === undefined) return String(x);
  return Array.isArray(x) ? 'an array' : 'an object';
}

const CHUNK_BYTES = 1 << 16;

/**
 * A Mooncake JSONL file read synchronously in 64 KiB chunks: memory is one chunk plus one line
 * (at most `MAX_TRACE_LINE_BYTES`), whatever the file's size. Errors name the file and line.
 */
export class JsonlTraceSource implements TraceSource {
  private fd: number | undefined;
  private readonly buffer = Buffer.alloc(CHUNK_BYTES);
  /** Bytes of the current, unfinished line (kept as chunks until its newline arrives). */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private lines: string[] = [];
  private lineNo = 0;
  private lastTs = -Infinity;
  private eof = false;

  constructor(
    private readonly path: string,
    private readonly blockSize: number,
  ) {
    if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw invalidArgument(`trace block size must be a positive integer, got ${blockSize}`);
    try {
      this.fd = openSync(path, 'r');
    } catch (err) {
      throw invalidArgument(`cannot read trace ${path}: ${(err as Error).message}`);
    }
  }

  next(): TraceRequest | undefined {
    for (;;) {
      const line = this.nextLine();
      if (line === undefined) return undefined;
      this.lineNo++;
      if (line.trim() === '') continue;
      const r = parseTraceLine(line, this.blockSize, `${this.path} line ${this.lineNo}`);
      if (r.arrivalMs < this.lastTs) {
        throw invalidArgument(`${this.path} line ${this.lineNo}: timestamp ${r.arrivalMs} is earlier than the line before's (${this.lastTs}); the trace must be sorted by timestamp`);
      }
      this.lastTs = r.arrivalMs;
      return r;
    }
  }

  private nextLine(): string | undefined {
    while (this.lines.length === 0) {
      if (this.eof || this.fd === undefined) {
        if (this.partialBytes === 0) return undefined;
        const last = Buffer.concat(this.partial).toString('utf8');
        this.partial = [];
        this.partialBytes = 0;
        return last;
      }
      const n = readSync(this.fd, this.buffer, 0, CHUNK_BYTES, null);
      if (n === 0) {
        this.eof = true;
        this.close();
        continue;
      }
      let start = 0;
      for (let i = 0; i < n; i++) {
        if (this.buffer[i] !== 0x0a) continue;
        this.take(start, i);
        this.lines.push(Buffer.concat(this.partial).toString('utf8'));
        this.partial = [];
        this.partialBytes = 0;
        start = i + 1;
      }
      this.take(start, n);
    }
    return this.lines.shift();
  }

  /** Append buffer[from, to) to the current line, refusing a line past the limit before storing it. */
  private take(from: number, to: number): void {
    if (to <= from) return;
    this.partialBytes += to - from;
    if (this.partialBytes > MAX_TRACE_LINE_BYTES) {
      this.close();
      throw invalidArgument(`${this.path} line ${this.lineNo + this.lines.length + 1}: longer than ${MAX_TRACE_LINE_BYTES} bytes`);
    }
    this.partial.push(Buffer.from(this.buffer.subarray(from, to)));
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** A trace held in memory (tests, generators materialised for reuse). Sorted check as the file's. */
export class ArrayTraceSource implements TraceSource {
  private i = 0;
  constructor(private readonly requests: readonly TraceRequest[]) {}
  next(): TraceRequest | undefined {
    const r = this.requests[this.i];
    if (r === undefined) return undefined;
    if (this.i > 0 && r.arrivalMs < this.requests[this.i - 1]!.arrivalMs) throw invalidArgument(`trace request ${this.i}: arrival before the request before's`);
    this.i++;
    return r;
  }
  close(): void {}
}
