/**
 * Guided decoding on a reasoning model (one whose config names a `reasoning_parser`): the reasoning
 * is left free and the constraint applies to what follows it, as vLLM's structured-output manager
 * does with a reasoner (`reasoning_ended`, the parsers' `is_reasoning_end`):
 *
 * - The prompt already ended the reasoning (its last think marker token is the end one: Qwen3's
 *   `enable_thinking: false` renders `<think>\n\n</think>\n\n`): constrained from the first token.
 * - Otherwise unconstrained until the end marker token (`</think>`) is taken; the marker itself is
 *   not fed to the constraint, the token after it is its first. Once ended, reasoning stays ended.
 *
 * The gate is a `TokenConstraint` like any other, so a sequence's prior output tokens (a migrated or
 * disaggregated request) go through `advance` when its sampler is created and the gate's state is the
 * one the uninterrupted run reached. The output parsers split the text at the same marker
 * (`output-parsers/reasoning-parsers.ts`), so the constrained part is exactly the content.
 */
import { THINK_END, THINK_START } from '../output-parsers/reasoning-parsers.js';
import type { TokenConstraint } from './token-constraint.js';

/** A reasoning model's think marker token ids (one token each in the tokenizer). */
export interface ReasoningMarkers {
  /** `<think>`; undefined when the tokenizer has no such single token (only the end marker counts). */
  readonly startId: number | undefined;
  /** `</think>`. */
  readonly endId: number;
}

/** vLLM's `is_reasoning_end`: the last think marker among `tokenIds` is the end one. */
export function reasoningEnded(tokenIds: readonly number[], markers: ReasoningMarkers): boolean {
  for (let i = tokenIds.length - 1; i >= 0; i--) {
    const t = tokenIds[i]!;
    if (t === markers.endId) return true;
    if (t === markers.startId) return false;
  }
  return false;
}

/**
 * `inner` itself when the prompt already ended the reasoning; else a gate that holds it back until
 * the end marker is taken.
 */
export function gateOnReasoning(inner: TokenConstraint, markers: ReasoningMarkers, promptTokenIds: readonly number[]): TokenConstraint {
  return reasoningEnded(promptTokenIds, markers) ? inner : new ReasoningGate(inner, markers.endId);
}

export class ReasoningGate implements TokenConstraint {
  private ended = false;

  constructor(
    private readonly inner: TokenConstraint,
    private readonly endId: number,
  ) {}

  /** The reasoning has ended: the inner constraint is active. */
  get active(): boolean {
    return this.ended;
  }

  mask(logits: Float32Array): void {
    if (this.ended) this.inner.mask(logits);
  }

  advance(tokenId: number): boolean {
    if (this.ended) return this.inner.advance(tokenId);
    if (tokenId === this.endId) this.ended = true;
    return true;
  }

  /** While reasoning nothing is complete (min_tokens still holds the end ids back). */
  isComplete(): boolean {
    return this.ended && this.inner.isComplete();
  }
}

/**
 * The think markers of a tokenizer whose model names a reasoning parser (all of them mark reasoning
 * with `<think>…</think>`); undefined when `</think>` is not one token in it (guided decoding then
 * holds from the first token, as without a parser).
 */
export function reasoningMarkersOf(tokenizer: { tokenToId(token: string): number | undefined }): ReasoningMarkers | undefined {
  const endId = tokenizer.tokenToId(THINK_END);
  return endId === undefined ? undefined : { startId: tokenizer.tokenToId(THINK_START), endId };
}
