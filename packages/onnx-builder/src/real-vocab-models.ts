/**
 * The generated files of `test/fixtures/real_vocab_repository`: scripted decoders
 * (`buildScriptedDecoderModel`) at the real vocabulary widths of Qwen3, Llama 3, Mistral and Gemma 3,
 * each in a model folder of its family (`buildFamilyModelFiles`), answering whatever the prompt one
 * reply in its family's format. The config.pbtxt files (parsers, engine sizes) are committed.
 *
 * Replies may run past an end id on purpose: the decoder keeps to its script whatever it emitted, so
 * text after `<|endoftext|>` (Qwen3) or `<|end_of_text|>` (Llama 3) is only ever seen when that id,
 * which generation_config.json alone names, fails to stop generation.
 */
import { buildFamilyModelFiles, type ModelFamily } from './family-tokenizer-files.js';
import type { GeneratedFile } from './repository-plan.js';
import { buildScriptedDecoderModel } from './scripted-decoder.js';

export interface RealVocabModel {
  readonly family: ModelFamily;
  /** The decoder's whole output, special tokens written as text; generation stops at its first end id. */
  readonly reply: string;
}

/** Model name → family and reply. */
export const REAL_VOCAB_MODELS = {
  qwen3_hermes: {
    family: 'qwen3',
    reply:
      '<think>\nThe user wants the weather and the time.\n</think>\n\nChecking the weather ☀️ in Zürich.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call><|endoftext|> Text after the end.<|im_end|>',
  },
  qwen3_json: { family: 'qwen3', reply: '{"city": "Paris", "temperature": 21, "sunny": true, "note": "Zürich ☀️"}<|im_end|>' },
  llama3_json: { family: 'llama3', reply: '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}<|end_of_text|> Text after the end.<|eot_id|>' },
  mistral_tools: {
    family: 'mistral',
    reply: '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}, {"name": "get_time", "arguments": {"tz": "CET"}}]</s>',
  },
  gemma3_pythonic: { family: 'gemma3', reply: "[get_weather(city='Paris', days=(1, 2)), get_time(tz=\"CET\")]<end_of_turn>" },
} as const satisfies Record<string, RealVocabModel>;

export type RealVocabModelName = keyof typeof REAL_VOCAB_MODELS;

/** The scripted decoder of `name`: logits as wide as its config.json's vocab_size. */
export function buildRealVocabDecoder(name: RealVocabModelName): Uint8Array {
  const { family, reply } = REAL_VOCAB_MODELS[name] as RealVocabModel;
  const f = buildFamilyModelFiles(family);
  const marker = f.addedTokenIds[f.turnMarker];
  if (marker === undefined) throw new Error(`${family}: no added token ${f.turnMarker}`);
  return buildScriptedDecoderModel({ vocabSize: f.vocabSize, markerTokenId: marker, offset: f.encode(f.afterTurnMarker).length, script: f.encode(reply) });
}

/** Generated files of `test/fixtures/real_vocab_repository` (each folder's files built once per process). */
export function realVocabRepositoryFiles(): GeneratedFile[] {
  const enc = new TextEncoder();
  const out: GeneratedFile[] = [];
  for (const [name, { family }] of Object.entries(REAL_VOCAB_MODELS) as Array<[RealVocabModelName, RealVocabModel]>) {
    out.push({ path: `${name}/1/model.onnx`, build: () => buildRealVocabDecoder(name) });
    for (const file of ['tokenizer.json', 'tokenizer_config.json', 'config.json', 'generation_config.json', ...(family === 'gemma3' ? ['chat_template.jinja'] : [])]) {
      out.push({ path: `${name}/1/${file}`, build: () => enc.encode(buildFamilyModelFiles(family).files[file]!) });
    }
  }
  return out;
}
