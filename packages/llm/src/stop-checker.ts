/**
 * Deciding when a sequence ends and which text the client sees, one generated token at a time.
 *
 * Order of checks per token (vLLM v1's): a stop token id or EOS → "stop"; then stop strings on the
 * detokenised text → "stop"; then the token count reaching max_tokens → "length". A stop token's own
 * text and a stop string itself are never emitted (OpenAI). Text that could be the start of a stop
 * string is held back until the next token settles it, so a stop string split across tokens is still
 * caught and never half-emitted; when generation ends for any other reason the held text is released.
 * Before `min_tokens` tokens, neither end ids nor stop strings end the sequence (vLLM): only max_tokens.
 *
 * One `StopChecker` per sequence; it owns the sequence's `TextDeltaSource` (the detokeniser) because
 * it alone knows whether a token's text should be decoded at all.
 */
import type { TextDeltaSource } from './detokenizer.js';
import type { CompiledSamplingParams } from './sampling-params.js';

/** OpenAI finish reasons the engine produces; `abort` is the engine's own (client gone, cancelled). */
export type FinishReason = 'stop' | 'length' | 'abort';

export interface StopStep {
  /** Text to send to the client for this token (may be ''). */
  readonly text: string;
  /** `null` while generation continues. */
  readonly finishReason: FinishReason | null;
  /**
   * vLLM's `stop_reason`: the stop string or stop token id that ended the sequence; `null` for EOS,
   * length, or while running.
   */
  readonly stopReason: string | number | null;
}

const RUNNING = (text: string): StopStep => ({ text, finishReason: null, stopReason: null });

export class StopChecker {
  private readonly stopTokens: ReadonlySet<number>;
  private readonly eos: ReadonlySet<number>;
  private held = '';
  private generated = 0;
  private finished: FinishReason | null = null;

  /**
   * `eosTokenIds`: the model's end-of-sequence ids (ignored when params.ignore_eos).
   * `maxTokens`: the effective limit (the request's max_tokens, or what the context leaves); `null` =
   * no limit here.
   */
  constructor(
    private readonly params: CompiledSamplingParams,
    private readonly text: TextDeltaSource,
    eosTokenIds: Iterable<number> = [],
    private readonly maxTokens: number | null = params.max_tokens,
  ) {
    this.stopTokens = new Set(params.stop_token_ids);
    this.eos = new Set(params.ignore_eos ? [] : eosTokenIds);
  }

  get finishReason(): FinishReason | null {
    return this.finished;
  }

  /** Tokens accepted so far, including a final stop token. */
  get numGenerated(): number {
    return this.generated;
  }

  /** Call once per generated token, in order. Calling after the sequence finished is a bug. */
  step(tokenId: number): StopStep {
    if (this.finished !== null) throw new Error(`StopChecker.step after finish (${this.finished})`);
    this.generated++;

    const ending = this.generated >= this.params.min_tokens;
    if (ending && (this.stopTokens.has(tokenId) || this.eos.has(tokenId))) {
      const text = this.release();
      this.finished = 'stop';
      return { text, finishReason: 'stop', stopReason: this.stopTokens.has(tokenId) ? tokenId : null };
    }

    let pending = this.held + this.text.push(tokenId);
    this.held = '';
    const stops = ending ? this.params.stop : [];
    if (stops.length > 0) {
      const match = earliestMatch(pending, stops);
      if (match !== null) {
        this.finished = 'stop';
        return { text: pending.slice(0, match.index), finishReason: 'stop', stopReason: match.stop };
      }
    }
    if (this.maxTokens !== null && this.generated >= this.maxTokens) {
      const all = pending + this.text.flush();
      const match = stops.length > 0 ? earliestMatch(all, stops) : null;
      this.finished = match === null ? 'length' : 'stop';
      return match === null
        ? { text: all, finishReason: 'length', stopReason: null }
        : { text: all.slice(0, match.index), finishReason: 'stop', stopReason: match.stop };
    }
    if (stops.length > 0) {
      const keep = heldSuffixLength(pending, stops);
      this.held = pending.slice(pending.length - keep);
      pending = pending.slice(0, pending.length - keep);
    }
    return RUNNING(pending);
  }

  /**
   * The engine ended the sequence for its own reason (client cancelled, context full → 'length').
   * Returns the held-back text; a no-op returning '' if already finished.
   */
  finish(reason: FinishReason): StopStep {
    if (this.finished !== null) return { text: '', finishReason: this.finished, stopReason: null };
    this.finished = reason;
    return { text: this.release(), finishReason: reason, stopReason: null };
  }

  private release(): string {
    const text = this.held + this.text.flush();
    this.held = '';
    return text;
  }
}

/** The stop string occurrence that starts first (the longest one on a tie). */
function earliestMatch(text: string, stops: readonly string[]): { index: number; stop: string } | null {
  let best: { index: number; stop: string } | null = null;
  for (const stop of stops) {
    const i = text.indexOf(stop);
    if (i < 0) continue;
    if (best === null || i < best.index || (i === best.index && stop.length > best.stop.length)) {
      best = { index: i, stop };
    }
  }
  return best;
}

/** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
function heldSuffixLength(text: string, stops: readonly string[]): number {
  let keep = 0;
  for (const stop of stops) {
    const max = Math.min(stop.length - 1, text.length);
    for (let n = max; n > keep; n--) {
      if (text.endsWith(stop.slice(0, n))) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}
