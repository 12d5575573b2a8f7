/**
 * Streaming detokenisation: turn generated token ids into text deltas, one token at a time, without
 * ever splitting a UTF-8 character and at O(1) cost per token.
 *
 * The approach is vLLM's incremental detokenisation. Two offsets into the token list:
 * `prefixOffset` starts a short window of already-emitted tokens that gives the decoder its context
 * (SentencePiece's leading-space rule, byte-level BPE pieces that only form a character together), and
 * `readOffset` marks where emitted text ends. For each new token the window is decoded twice —
 * `[prefixOffset, readOffset)` and `[prefixOffset, end)` — and the second's extra characters are the
 * delta. While the decoded window ends in U+FFFD (an incomplete byte sequence: the rest of the
 * character is in tokens still to come) nothing is emitted and the offsets stay put, so the window
 * grows only by the held tokens (at most three for valid UTF-8) and then shrinks back.
 *
 * Text that truly ends in an invalid byte sequence is held until `flush()`, which the caller makes
 * when the sequence finishes; it then comes out with its U+FFFD, exactly as a full decode would.
 */

/**
 * Decode token ids to text. Supplied by the tokenizer adapter; must be pure and must render an
 * incomplete UTF-8 byte sequence at the end as U+FFFD (as Hugging Face decoders do), and should skip
 * special tokens if the caller wants them out of the text.
 */
export type DecodeFn = (ids: readonly number[]) => string;

/** Anything that turns one token id at a time into text deltas (the stop checker reads this). */
export interface TextDeltaSource {
  /** Add one generated token; returns the text it completes ('' while a character is incomplete). */
  push(tokenId: number): string;
  /** The sequence is over: return whatever is still held back. */
  flush(): string;
}

/** How many prompt tokens seed the window, as in vLLM (enough context for a leading-space rule). */
export const DEFAULT_PROMPT_CONTEXT_TOKENS = 5;

const REPLACEMENT = '\uFFFD';

export class IncrementalDetokenizer implements TextDeltaSource {
  /** The window's token ids: up to a few prompt tokens, then the generated ones not yet dropped. */
  private tokens: number[];
  private prefixOffset: number;
  private readOffset: number;
  private emitted = '';

  /**
   * `promptTokenIds`: only the last `DEFAULT_PROMPT_CONTEXT_TOKENS` are kept, as decoding context;
   * their text is never emitted.
   */
  constructor(
    private readonly decode: DecodeFn,
    promptTokenIds: readonly number[] = [],
  ) {
    this.tokens = promptTokenIds.slice(-DEFAULT_PROMPT_CONTEXT_TOKENS);
    this.prefixOffset = 0;
    this.readOffset = this.tokens.length;
  }

  /** Every character emitted so far (the generated text, less anything still held back). */
  get text(): string {
    return this.emitted;
  }

  push(tokenId: number): string {
    this.tokens.push(tokenId);
    const prefixText = this.decode(this.tokens.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.tokens.slice(this.prefixOffset));
    if (newText.length <= prefixText.length || newText.endsWith(REPLACEMENT)) return '';
    const delta = newText.slice(prefixText.length);
    // Slide the window: the tokens just emitted become the next decode's context.
    this.prefixOffset = this.readOffset;
    this.readOffset = this.tokens.length;
    this.compact();
    this.emitted += delta;
    return delta;
  }

  flush(): string {
    if (this.readOffset === this.tokens.length) return '';
    const prefixText = this.decode(this.tokens.slice(this.prefixOffset, this.readOffset));
    const newText = this.decode(this.tokens.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset;
    this.readOffset = this.tokens.length;
    this.compact();
    const delta = newText.length > prefixText.length ? newText.slice(prefixText.length) : '';
    this.emitted += delta;
    return delta;
  }

  /** Drop tokens before the window so memory and slicing stay bounded. */
  private compact(): void {
    if (this.prefixOffset < 64) return;
    this.tokens = this.tokens.slice(this.prefixOffset);
    this.readOffset -= this.prefixOffset;
    this.prefixOffset = 0;
  }
}
