/**
 * Model folders of four real model families at their real widths, for decoders that must be served
 * like the real exports: `tokenizer.json` (byte-level BPE), `tokenizer_config.json` (added tokens,
 * special token strings, the chat template, or `chat_template.jinja` beside it as newer exports have),
 * `config.json` (`vocab_size`: the logits' width, end and begin ids) and `generation_config.json`
 * (end ids, sampling defaults), with every added token at its real id and with its real `special` flag:
 *
 * | family  | tokenizer ids | config vocab_size | end ids: config.json → generation_config.json |
 * |---------|---------------|-------------------|------------------------------------------------|
 * | qwen3   | 151,669 (added 151643–151668) | 151,936 (a padded LM head) | 151645 → 151645, 151643 |
 * | llama3  | 128,256 (added 128000–128255) | 128,256 | 128009 → 128001, 128008, 128009 |
 * | mistral | 32,768 (added 0–770, v3's control tokens) | 32,768 | 2 → 2 |
 * | gemma3  | 262,145 (`<image_soft_token>` 262144) | 262,144 (one id narrower) | 1, 106 → 1, 106 |
 *
 * The regular vocabulary is synthetic and a pure function of the family: the 256 byte tokens (GPT-2's
 * byte-to-character table), then words of a built-in corpus (the templates' and tool schemas' words,
 * so a rendered prompt is a few hundred tokens, not thousands), then seeded pseudo-words and numbers
 * until every free id is used. Each token past the bytes is one merge of a shorter token and one
 * character, so the merges are a valid BPE and every token is reachable. Building the widest family
 * takes about a second of CPU; its tokenizer.json is 8 MB (Qwen3's 4.6 MB).
 */
import { addedTokensDecoder, bpeModel, JS_SPLIT, spec, type AddedToken, type ModelFamily } from './family-specs.js';
import { mulberry32 } from './prng.js';
import { byteToUnicode } from './tiny-tokenizer-files.js';

export { MODEL_FAMILIES, type ModelFamily } from './family-specs.js';

/** A family's folder, its widths and the ids a scripted decoder needs. */
export interface FamilyModelFiles {
  readonly family: ModelFamily;
  /** File name → content (tokenizer.json, tokenizer_config.json, config.json, generation_config.json, and chat_template.jinja for gemma3). */
  readonly files: Readonly<Record<string, string>>;
  /** config.json's vocab_size: the width the decoder's logits must have. */
  readonly vocabSize: number;
  /** One more than the largest token id of tokenizer.json. */
  readonly tokenizerSize: number;
  /** Every added token's content → id. */
  readonly addedTokenIds: Readonly<Record<string, number>>;
  /** The token that opens the generation prompt's turn (the scripted decoder's marker). */
  readonly turnMarker: string;
  /** What the generation prompt renders after `turnMarker` (its tokens are the decoder's offset). */
  readonly afterTurnMarker: string;
  /** The token that ends an assistant turn in this family's template. */
  readonly endOfTurn: string;
  /**
   * `text`'s token ids as the tokenizer encodes it (no BOS added): added tokens written in the text
   * match as one id, the rest is pre-tokenized by the family's pattern and merged by rank (BPE). Lets
   * a scripted decoder's reply be built without loading tokenizer.json in a tokenizer library.
   */
  encode(text: string): number[];
}

/** Text whose words become whole tokens: what the templates render and the tools and replies the tests use. */
const CORPUS = [
  'You are a helpful assistant. The user asks a question and the assistant answers it.',
  'What is the weather in Paris today? Weather and time in Paris? The weather in Paris is sunny, 21 degrees.',
  'Checking the weather. Let me look up the forecast. The user wants the weather and the time.',
  '{"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "array"}}, "required": ["city"]}}}',
  '{"name": "get_time", "arguments": {"tz": "CET"}} {"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}',
  '[get_weather(city=\'Paris\', days=(1, 2)), get_time(tz="CET")] {"city": "Paris", "temperature": 21, "sunny": true}',
  'Answer with a function call from the list below, as JSON in the form of name and parameters. Use no variables.',
  'These functions are available to help with the request. Their signatures, inside tools XML tags.',
  'To call a function, answer a JSON object with its name and arguments inside tool_call XML tags.',
  'You may call these functions. To call them, answer only a Python list of calls: func_name param value',
  'Environment: ipython Cutting Knowledge Date: December 2023 Today Date: 26 Jul 2024 system user assistant model',
].join('\n');

/**
 * The regular vocabulary: `ids` (ascending, the ids no added token takes) filled with the 256 byte
 * tokens, the corpus's words, then pseudo-words; and the merges that build them.
 */
function regularVocabulary(ids: readonly number[], split: RegExp, seed: number, extraText: string): { vocab: Record<string, number>; merges: string[][] } {
  const byteChars = byteToUnicode();
  const encoder = new TextEncoder();
  const vocab = new Map<string, number>();
  const merges: string[][] = [];
  let next = 0;
  const full = (): boolean => next >= ids.length;
  for (const ch of byteChars) vocab.set(ch, ids[next++]!);
  /** Adds the merges that build `symbols` left to right (each prefix and its next character). */
  const addWord = (symbols: readonly string[]): void => {
    let prefix = symbols[0]!;
    for (let i = 1; i < symbols.length && !full(); i++) {
      const merged = prefix + symbols[i]!;
      if (!vocab.has(merged)) {
        vocab.set(merged, ids[next++]!);
        merges.push([prefix, symbols[i]!]);
      }
      prefix = merged;
    }
  };
  const byteSymbols = (text: string): string[] => [...encoder.encode(text)].map((b) => byteChars[b]!);

  // The corpus's words, most frequent first (ties by the word), then whitespace runs.
  const counts = new Map<string, number>();
  for (const m of `${CORPUS}\n${extraText}`.matchAll(split)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
  const words = [...counts.entries()].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0)).map(([w]) => w);
  for (const w of words) addWord(byteSymbols(w));
  for (const ws of [' ', '\n', '\t']) addWord(byteSymbols(ws.repeat(16)));

  // Numbers, then pseudo-words: syllables with and without a leading space, seeded.
  for (let n = 0; n < 1000; n++) addWord(byteSymbols(String(n)));
  const rand = mulberry32(seed);
  const consonants = 'bcdfghjklmnprstvwyzbcdlmnrst';
  const vowels = 'aeiouaeioy';
  const pick = (s: string): string => s[Math.floor(rand() * s.length)]!;
  while (!full()) {
    const syllables = 1 + Math.floor(rand() * 4);
    let w = '';
    for (let s = 0; s < syllables; s++) w += pick(consonants) + pick(vowels) + (rand() < 0.4 ? pick(consonants) : '');
    if (rand() < 0.2) w = w[0]!.toUpperCase() + w.slice(1);
    addWord(byteSymbols(rand() < 0.6 ? ` ${w}` : w));
  }
  return { vocab: Object.fromEntries(vocab), merges };
}

const memo = new Map<ModelFamily, FamilyModelFiles>();

/** The folder of `family`, built once per process (the widest, Gemma 3's, in about 1 s of CPU). */
export function buildFamilyModelFiles(family: ModelFamily): FamilyModelFiles {
  const cached = memo.get(family);
  if (cached !== undefined) return cached;
  const s = spec(family);
  const taken = new Set(s.added.map((t) => t.id));
  const ids: number[] = [];
  for (let id = 0; id < s.tokenizerSize; id++) if (!taken.has(id)) ids.push(id);
  const { vocab, merges } = regularVocabulary(ids, JS_SPLIT[s.split], s.seed, s.template);
  const model = bpeModel(vocab, merges, family === 'llama3');
  const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;
  const tokenizerConfig = {
    ...s.tokenizerConfig,
    added_tokens_decoder: addedTokensDecoder(s.added),
    ...(s.chatTemplateFile ? {} : { chat_template: s.template }),
  };
  const files: Record<string, string> = {
    // The vocabulary and merges on one line each entry would make 20 MB; compact like the exports' own JSON is not needed.
    'tokenizer.json': JSON.stringify(s.tokenizerJson(model, s.added)),
    'tokenizer_config.json': json(tokenizerConfig),
    'config.json': json(s.config),
    'generation_config.json': json(s.generationConfig),
  };
  if (s.chatTemplateFile) files['chat_template.jinja'] = s.template;
  const encode = bpeEncoder(vocab, merges, s.added, JS_SPLIT[s.split], family === 'qwen3', family === 'llama3');
  const built: FamilyModelFiles = {
    family,
    files,
    vocabSize: s.vocabSize,
    tokenizerSize: s.tokenizerSize,
    addedTokenIds: Object.fromEntries(s.added.map((t) => [t.content, t.id])),
    turnMarker: s.turnMarker,
    afterTurnMarker: s.afterTurnMarker,
    endOfTurn: s.endOfTurn,
    encode,
  };
  memo.set(family, built);
  return built;
}

/** Byte-level BPE encoding over `vocab` and `merges` (see `FamilyModelFiles.encode`). */
function bpeEncoder(
  vocab: Readonly<Record<string, number>>,
  merges: readonly string[][],
  added: readonly AddedToken[],
  split: RegExp,
  nfc: boolean,
  ignoreMerges: boolean,
): (text: string) => number[] {
  const byteChars = byteToUnicode();
  const encoder = new TextEncoder();
  let ranks: Map<string, number> | undefined; // at the first encode: writing the files needs none
  const byContent = [...added].sort((a, b) => b.content.length - a.content.length);
  const word = (piece: string): number[] => {
    if (ranks === undefined) {
      ranks = new Map();
      for (let rank = 0; rank < merges.length; rank++) ranks.set(`${merges[rank]![0]} ${merges[rank]![1]}`, rank);
    }
    const whole = [...encoder.encode(piece)].map((b) => byteChars[b]!).join('');
    if (ignoreMerges && vocab[whole] !== undefined) return [vocab[whole]];
    let symbols = [...encoder.encode(piece)].map((b) => byteChars[b]!);
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = ranks!.get(`${symbols[i]} ${symbols[i + 1]}`);
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best < 0) break;
      const [a, b] = [symbols[best]!, symbols[best + 1]!];
      const next: string[] = [];
      for (let i = 0; i < symbols.length; i++) {
        if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) next.push(symbols[i++]! + b);
        else next.push(symbols[i]!);
      }
      symbols = next;
    }
    return symbols.map((sym) => vocab[sym]!);
  };
  return (text) => {
    const ids: number[] = [];
    let plain = '';
    const flush = (): void => {
      const normalized = nfc ? plain.normalize('NFC') : plain;
      for (const m of normalized.matchAll(split)) ids.push(...word(m[0]));
      plain = '';
    };
    for (let i = 0; i < text.length; ) {
      const hit = byContent.find((t) => text.startsWith(t.content, i));
      if (hit === undefined) {
        plain += text[i++];
        continue;
      }
      flush();
      ids.push(hit.id);
      i += hit.content.length;
    }
    flush();
    return ids;
  };
}
