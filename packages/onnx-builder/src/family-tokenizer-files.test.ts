import { describe, expect, it } from 'vitest';
import { buildFamilyModelFiles, MODEL_FAMILIES, type ModelFamily } from './family-tokenizer-files.js';
import { byteToUnicode } from './tiny-tokenizer-files.js';

/** The ids the real exports give their special tokens (the ones parsers, templates and end ids rely on). */
const REAL_IDS: Record<ModelFamily, Record<string, number>> = {
  qwen3: { '<|endoftext|>': 151643, '<|im_start|>': 151644, '<|im_end|>': 151645, '<tool_call>': 151657, '</tool_call>': 151658, '<tool_response>': 151665, '<think>': 151667, '</think>': 151668 },
  llama3: { '<|begin_of_text|>': 128000, '<|end_of_text|>': 128001, '<|start_header_id|>': 128006, '<|end_header_id|>': 128007, '<|eom_id|>': 128008, '<|eot_id|>': 128009, '<|python_tag|>': 128010, '<|reserved_special_token_247|>': 128255 },
  mistral: { '<s>': 1, '</s>': 2, '[INST]': 3, '[/INST]': 4, '[TOOL_CALLS]': 5, '[AVAILABLE_TOOLS]': 6, '[/AVAILABLE_TOOLS]': 7, '[TOOL_RESULTS]': 8 },
  gemma3: { '<pad>': 0, '<eos>': 1, '<bos>': 2, '<start_of_turn>': 105, '<end_of_turn>': 106, '<start_of_image>': 255999, '<image_soft_token>': 262144 },
};
const WIDTHS: Record<ModelFamily, [tokenizer: number, config: number]> = { qwen3: [151669, 151936], llama3: [128256, 128256], mistral: [32768, 32768], gemma3: [262145, 262144] };

const unicodeToByte = new Map(byteToUnicode().map((ch, b) => [ch, b]));

describe('buildFamilyModelFiles', () => {
  for (const family of MODEL_FAMILIES) {
    it(`${family}: a dense byte-level BPE at the real width, special tokens at their real ids, a valid merge list`, () => {
      const f = buildFamilyModelFiles(family);
      const tok = JSON.parse(f.files['tokenizer.json']!) as { added_tokens: Array<{ id: number; content: string; special: boolean }>; model: { vocab: Record<string, number>; merges: string[][] } };
      const config = JSON.parse(f.files['config.json']!) as { vocab_size: number; eos_token_id: number | number[] };
      const tokConfig = JSON.parse(f.files['tokenizer_config.json']!) as { added_tokens_decoder: Record<string, { content: string }>; chat_template?: string };
      expect([f.tokenizerSize, f.vocabSize, config.vocab_size]).toEqual([...WIDTHS[family], WIDTHS[family][1]]);
      // Every id below the tokenizer's width exactly once, in the vocabulary or as an added token.
      const seen = new Uint8Array(f.tokenizerSize);
      for (const id of [...Object.values(tok.model.vocab), ...tok.added_tokens.map((t) => t.id)]) seen[id]!++;
      expect(seen.every((n) => n === 1)).toBe(true);
      for (const [content, id] of Object.entries(REAL_IDS[family])) {
        expect(f.addedTokenIds[content]).toBe(id);
        expect(tokConfig.added_tokens_decoder[String(id)]?.content).toBe(content);
      }
      // Each merge joins two tokens into a third; every token past the 256 bytes is made by one.
      const made = new Set<string>();
      const broken = tok.model.merges.filter(([a, b]) => {
        made.add(a! + b!);
        return tok.model.vocab[a!] === undefined || tok.model.vocab[b!] === undefined || tok.model.vocab[a! + b!] === undefined;
      });
      expect(broken).toEqual([]);
      expect(made.size).toBe(Object.keys(tok.model.vocab).length - 256);
      expect(tokConfig.chat_template ?? f.files['chat_template.jinja']).toContain(f.turnMarker);
      expect(f.files['generation_config.json']).toContain('eos_token_id');
    });
  }

  it('encode: added tokens as one id each, the rest in vocabulary tokens that spell the text back', () => {
    for (const family of MODEL_FAMILIES) {
      const f = buildFamilyModelFiles(family);
      const byId = new Map(Object.entries((JSON.parse(f.files['tokenizer.json']!) as { model: { vocab: Record<string, number> } }).model.vocab).map(([t, id]) => [id, t]));
      const text = `${f.turnMarker}${f.afterTurnMarker}The weather in Zürich ☀️: {"days": [1, 2]}  \n\n It's 2026.${f.endOfTurn}`;
      const ids = f.encode(text);
      expect(ids[0]).toBe(f.addedTokenIds[f.turnMarker]);
      expect(ids.at(-1)).toBe(f.addedTokenIds[f.endOfTurn]);
      const inner = ids.slice(1, -1).filter((id) => !Object.values(f.addedTokenIds).includes(id));
      const bytes = inner.flatMap((id) => [...byId.get(id)!].map((ch) => unicodeToByte.get(ch)!));
      expect(new TextDecoder().decode(Uint8Array.from(bytes))).toBe(text.slice(f.turnMarker.length, -f.endOfTurn.length).replace(/<\|end_header_id\|>/, ''));
      // Words of the built-in corpus are single tokens: a rendered prompt stays short.
      expect(f.encode(' weather').length).toBe(1);
    }
  });
});
