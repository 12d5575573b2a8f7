/**
 * `OutputProcessor`: the frontend's half of one generation (vLLM's output processor, Dynamo's
 * backend operator). The engine streams token ids; this turns each `GenerateOutput` into the text the
 * client sees, using an `IncrementalDetokenizer` (special tokens skipped unless the request's
 * `skip_special_tokens` is false) under a `StopChecker`.
 *
 * Who decides the end: the engine applies EOS, `stop_token_ids` and `max_tokens`; stop strings exist
 * only here. When a stop string ends the sequence, `process` says so once (`stoppedByString`) and the
 * caller must abort the engine request (its AbortSignal) so the KV blocks are freed. Tokens the engine
 * produced after that point are ignored: they were never the client's. `numTokens` therefore counts
 * what the client got (the finishing token included), which can be fewer than the engine's own usage
 * count.
 *
 * One instance per request; not safe to share. Feed outputs in order.
 */
import { IncrementalDetokenizer } from './detokenizer.js';
import type { GenerateOutput } from './llm-endpoint.js';
import type { CompiledSamplingParams } from './sampling-params.js';
import { StopChecker, type FinishReason } from './stop-checker.js';
import type { Tokenizer } from './tokenizer/tokenizer.js';
import type { TopLogprobs } from './sampling.js';

/** One generated token the client saw, with its logprob when the request asked for them. */
export interface ProcessedToken {
  readonly id: number;
  /** Natural log; undefined when the engine reported none. */
  readonly logprob: number | undefined;
  /** The most likely tokens at this position when the request asked for them, else undefined. */
  readonly top?: TopLogprobs;
}

/** What one engine output means to the client. */
export interface ProcessedOutput {
  /** Text to send now (may be ''; text that may start a stop string is held back until settled). */
  readonly text: string;
  /** The tokens of this output that count (none after the sequence ended here). */
  readonly tokens: readonly ProcessedToken[];
  /** null while running. 'abort' only when the engine aborted (the caller never asked it to). */
  readonly finishReason: FinishReason | null;
  /** The stop string or stop token id that ended the sequence (vLLM's stop_reason), else null. */
  readonly stopReason: string | number | null;
  /**
   * A stop string ended the sequence on this output (true once): the caller must now abort the
   * engine request, which knows nothing of stop strings (harmless if it finished anyway).
   */
  readonly stoppedByString: boolean;
}

export interface OutputProcessorOptions {
  readonly tokenizer: Tokenizer;
  readonly sampling: CompiledSamplingParams;
  /** The prompt; its last tokens give the detokeniser context (leading spaces), never text. */
  readonly promptTokenIds: readonly number[];
  /**
   * The model's EOS ids, the ones the engine applies (the endpoint card's); default the tokenizer's.
   * Ignored when sampling.ignore_eos.
   */
  readonly eosTokenIds?: readonly number[];
  /** Leave special tokens out of the text (default true); false when a parser reads them (Mistral's `[TOOL_CALLS]`). */
  readonly skipSpecialTokens?: boolean;
}

const NOTHING: ProcessedOutput = { text: '', tokens: [], finishReason: null, stopReason: null, stoppedByString: false };

export class OutputProcessor {
  private readonly stop: StopChecker;
  private finish: FinishReason | null = null;
  private reason: string | number | null = null;
  private fullText = '';

  constructor(options: OutputProcessorOptions) {
    const { tokenizer } = options;
    // the request's skip_special_tokens, unless a parser reads special tokens (then they stay)
    const skipSpecialTokens = options.sampling.skip_special_tokens && (options.skipSpecialTokens ?? true);
    const detokenizer = new IncrementalDetokenizer((ids) => tokenizer.decode(ids, { skipSpecialTokens }), options.promptTokenIds);
    this.stop = new StopChecker(options.sampling, detokenizer, options.eosTokenIds ?? tokenizer.eosTokenIds);
  }

  /** null until the sequence ended (here or in the engine). */
  get finishReason(): FinishReason | null {
    return this.finish;
  }

  get stopReason(): string | number | null {
    return this.reason;
  }

  /** Tokens the client got, the finishing one included (OpenAI `usage.completion_tokens`). */
  get numTokens(): number {
    return this.stop.numGenerated;
  }

  /** All text returned so far (a non-streaming response's content). */
  get text(): string {
    return this.fullText;
  }

  /** Feed the engine's next output. After the sequence ended, outputs are ignored (NOTHING). */
  process(output: GenerateOutput): ProcessedOutput {
    if (this.finish !== null) return NOTHING;
    let text = '';
    const tokens: ProcessedToken[] = [];
    for (let i = 0; i < output.tokenIds.length; i++) {
      const id = output.tokenIds[i] as number;
      const step = this.stop.step(id);
      text += step.text;
      const top = output.topLogprobs?.[i];
      tokens.push(top === undefined ? { id, logprob: output.logprobs?.[i] } : { id, logprob: output.logprobs?.[i], top });
      if (step.finishReason !== null) {
        this.end(step.finishReason, step.stopReason);
        this.fullText += text;
        return { text, tokens, finishReason: this.finish, stopReason: this.reason, stoppedByString: typeof step.stopReason === 'string' };
      }
    }
    if (output.finishReason !== null) {
      // The engine ended it for a reason the checker did not see (context length, abort, an EOS id the
      // card does not list): release the held-back text.
      const step = this.stop.finish(output.finishReason);
      text += step.text;
      this.end(output.finishReason, output.stopReason);
    }
    this.fullText += text;
    return { text, tokens, finishReason: this.finish, stopReason: this.reason, stoppedByString: false };
  }

  private end(reason: FinishReason, stopReason: string | number | null): void {
    this.finish = reason;
    this.reason = stopReason;
  }
}
