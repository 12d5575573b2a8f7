/**
 * `buildScriptedDecoderModel`: a decoder-only "model" in the Optimum `*-with-past` signature (the
 * tiny decoder's: input_ids, attention_mask, position_ids, one layer of past_key_values → logits and
 * present) whose greedy output is a fixed script, whatever the prompt: the reply a test wants to see
 * (a tool call in some model's format, a `<think>` block). It runs through the real engine (paged KV,
 * prefix cache, chunked prefill, preemption, migration with prior output tokens) like any export.
 *
 * How: the KV cache stores, per position, the position itself where the token is `markerTokenId`
 * (the chat template's `<|im_start|>`) and -1 elsewhere (key and value alike, one KV head of size 1).
 * Each query takes the largest stored value it may see (causal and attention_mask, as attention
 * does), so it knows how far it is past the last marker: k = position - last marker. The logits put
 * all weight on `table[min(k, last)]`, where table[offset + n] = script[n]: the n-th generated token
 * after a prompt that ends `offset` tokens past its last marker (`<|im_start|>assistant\n`: the
 * tokens of "assistant\n"). Past the script the table repeats its last entry (give it an EOS).
 * Only positions matter, never the tokens generated, so a continuation after any prefix of the
 * script (a migrated request) continues the script.
 */
import { GraphBuilder } from './graph-builder.js';

/** The scripted token's logit (every other is 0): at any temperature a sampler picks it (e^-WEIGHT/T per other token). */
const WEIGHT = 30;

export interface ScriptedDecoderOptions {
  /** Vocabulary size (logits width); must match the tokenizer's. */
  readonly vocabSize: number;
  /** The token after which the tokens are counted (a chat template's turn opener). */
  readonly markerTokenId: number;
  /** Tokens from the marker to the end of the prompt, the marker excluded ("assistant\n" in ChatML). */
  readonly offset: number;
  /** The reply's token ids; end it with an EOS id so the engine stops. */
  readonly script: readonly number[];
}

export function buildScriptedDecoderModel(options: ScriptedDecoderOptions): Uint8Array {
  const { vocabSize: V, markerTokenId, offset, script } = options;
  if (script.length === 0) throw new Error('the script is empty');
  for (const id of [markerTokenId, ...script]) if (!Number.isInteger(id) || id < 0 || id >= V) throw new Error(`token id ${id} is outside the vocabulary`);
  const table = [...Array.from({ length: offset }, () => script[0] as number), ...script];
  const g = new GraphBuilder('scripted_decoder');
  g.input('input_ids', 'INT64', ['batch_size', 'sequence_length']);
  g.input('attention_mask', 'INT64', ['batch_size', 'past_sequence_length + sequence_length']);
  g.input('position_ids', 'INT64', ['batch_size', 'sequence_length']);
  g.input('past_key_values.0.key', 'FLOAT', ['batch_size', 1, 'past_sequence_length', 1]);
  g.input('past_key_values.0.value', 'FLOAT', ['batch_size', 1, 'past_sequence_length', 1]);
  g.output('logits', 'FLOAT', ['batch_size', 'sequence_length', V]);
  g.output('present.0.key', 'FLOAT', ['batch_size', 1, 'past_sequence_length + sequence_length', 1]);
  g.output('present.0.value', 'FLOAT', ['batch_size', 1, 'past_sequence_length + sequence_length', 1]);

  g.initializer('i0', 'INT64', [], [0]);
  g.initializer('i1', 'INT64', [], [1]);
  g.initializer('axes1', 'INT64', [1], [1]);
  g.initializer('axes3', 'INT64', [1], [3]);
  g.initializer('axes13', 'INT64', [2], [1, 3]);
  g.initializer('marker', 'INT64', [], [markerTokenId]);
  g.initializer('minus1', 'FLOAT', [], [-1]);
  g.initializer('zero_f', 'FLOAT', [], [0]);
  g.initializer('last_f', 'FLOAT', [], [table.length - 1]);
  g.initializer('depth', 'INT64', [], [V]);
  g.initializer('off_on', 'FLOAT', [2], [0, WEIGHT]);
  g.initializer('table', 'INT64', [table.length], table);

  // What each new position stores: its position if it is a marker, else -1.
  g.node('Equal', ['input_ids', 'marker'], ['is_marker']);
  g.node('Cast', ['position_ids'], ['pos_f'], { to: 1 });
  g.node('Where', ['is_marker', 'pos_f', 'minus1'], ['stored']);
  g.node('Unsqueeze', ['stored', 'axes13'], ['new_kv']);
  g.node('Concat', ['past_key_values.0.key', 'new_kv'], ['present.0.key'], { axis: 2 });
  g.node('Concat', ['past_key_values.0.value', 'new_kv'], ['present.0.value'], { axis: 2 });

  // Visible keys [batch, seq, total]: j <= past + i and attention_mask[b, j].
  g.node('Shape', ['input_ids'], ['ids_shape']);
  g.node('Gather', ['ids_shape', 'i1'], ['seq_len'], { axis: 0 });
  g.node('Shape', ['attention_mask'], ['mask_shape']);
  g.node('Gather', ['mask_shape', 'i1'], ['total_len'], { axis: 0 });
  g.node('Sub', ['total_len', 'seq_len'], ['past_len']);
  g.node('Range', ['past_len', 'total_len', 'i1'], ['query_index']);
  g.node('Range', ['i0', 'total_len', 'i1'], ['key_index']);
  g.node('Unsqueeze', ['query_index', 'axes1'], ['query_index_col']);
  g.node('LessOrEqual', ['key_index', 'query_index_col'], ['causal']);
  g.node('Cast', ['attention_mask'], ['mask_bool'], { to: 9 });
  g.node('Unsqueeze', ['mask_bool', 'axes1'], ['mask_b1t']);
  g.node('And', ['causal', 'mask_b1t'], ['visible']);

  // The last marker each query sees, and how far past it the query is.
  g.node('Squeeze', ['present.0.key', 'axes3'], ['keys_b1t']);
  g.node('Where', ['visible', 'keys_b1t', 'minus1'], ['seen']);
  g.node('ReduceMax', ['seen'], ['last_marker'], { axes: [2], keepdims: 0 });
  g.node('Sub', ['pos_f', 'last_marker'], ['k_f']);
  g.node('Clip', ['k_f', 'zero_f', 'last_f'], ['k_clipped']);
  g.node('Cast', ['k_clipped'], ['k'], { to: 7 });
  g.node('Gather', ['table', 'k'], ['next_token'], { axis: 0 });

  // Logits: WEIGHT on the scripted token, 0 elsewhere; one tensor of the vocabulary's width per
  // position (a 262k-wide vocabulary costs 1 MB per position, nothing more).
  g.node('OneHot', ['next_token', 'depth', 'off_on'], ['logits'], { axis: -1 });
  return g.buildModel({ opset: 17 });
}
