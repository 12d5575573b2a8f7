import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { describe, expect, it } from 'vitest';
import { IncrementalDetokenizer, type DecodeFn } from './detokenizer.js';
import { Tokenizer } from './tokenizer/tokenizer.js';

/**
 * A fake byte-level BPE vocabulary: token id i stands for `pieces[i]` (a byte string), and decoding is
 * UTF-8 over the concatenated bytes with U+FFFD for an incomplete tail, as Hugging Face decoders do.
 */
function byteVocab(text: string, sizes: number[]): { ids: number[]; decode: DecodeFn; calls: number[] } {
  const bytes = new TextEncoder().encode(text);
  const pieces: Uint8Array[] = [];
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const n = sizes[k % sizes.length]!;
    pieces.push(bytes.slice(at, at + n));
    at += n;
  }
  const calls: number[] = [];
  const td = new TextDecoder('utf-8', { fatal: false });
  const decode: DecodeFn = (ids) => {
    calls.push(ids.length);
    const parts = ids.map((i) => pieces[i]!);
    const all = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) {
      all.set(p, o);
      o += p.length;
    }
    return td.decode(all);
  };
  return { ids: pieces.map((_, i) => i), decode, calls };
}

const TEXT = 'héllo 世界! 👋🏽 ok — 😀😀 fin ✓';

describe('IncrementalDetokenizer', () => {
  it.each([[[1]], [[2]], [[3]], [[1, 2]], [[5, 1, 3]], [[4, 4, 1]]])(
    'never emits U+FFFD for characters split across tokens (piece sizes %j)',
    (sizes) => {
      const { ids, decode } = byteVocab(TEXT, sizes);
      const d = new IncrementalDetokenizer(decode);
      const deltas = ids.map((id) => d.push(id));
      deltas.push(d.flush());
      for (const delta of deltas) expect(delta).not.toContain('\uFFFD');
      expect(deltas.join('')).toBe(TEXT);
      expect(d.text).toBe(TEXT);
      // Every held character comes out with the token that completes it.
      expect(deltas.filter((x) => x === '').length).toBeGreaterThanOrEqual(sizes.includes(1) ? 1 : 0);
    },
  );

  it('holds an incomplete tail until flush, which returns it as a full decode would', () => {
    const { ids, decode } = byteVocab('ab😀', [1]);
    const d = new IncrementalDetokenizer(decode);
    // Push a, b and only the first two bytes of the emoji.
    expect([d.push(ids[0]!), d.push(ids[1]!), d.push(ids[2]!), d.push(ids[3]!)]).toEqual(['a', 'b', '', '']);
    expect(d.flush()).toBe('\uFFFD');
    expect(d.flush()).toBe('');
  });

  it('uses prompt tokens as context only and keeps the decoded window bounded', () => {
    const long = 'x'.repeat(20) + '日本語のテキスト'.repeat(200);
    const { ids, decode, calls } = byteVocab(long, [2]);
    const d = new IncrementalDetokenizer(decode, ids.slice(0, 10));
    let out = '';
    for (const id of ids.slice(10)) out += d.push(id);
    out += d.flush();
    expect(out).toBe(long.slice(20));
    expect(Math.max(...calls)).toBeLessThanOrEqual(8);
  });

  it('emits the right delta when a decoder rewrites the start of the window', () => {
    // SentencePiece-style: a leading "▁" becomes a space except at the very start of the text.
    const pieces = ['▁Hello', '▁world', '!'];
    const decode: DecodeFn = (ids) => ids.map((i) => pieces[i]!).join('').replace(/▁/g, ' ').replace(/^ /, '');
    const d = new IncrementalDetokenizer(decode, [0]);
    expect([d.push(1), d.push(2)]).toEqual([' world', '!']);
  });
});

describe('IncrementalDetokenizer over the tiny byte-level BPE tokenizer', () => {
  it('streams multibyte text token by token exactly as the full decode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llm-detok-'));
    try {
      for (const [name, text] of Object.entries(buildTinyTokenizerFiles())) writeFileSync(join(dir, name), text);
      const tok = await Tokenizer.fromModelFolder(dir);
      const ids = tok.encode(TEXT);
      expect(ids.length).toBeGreaterThan([...TEXT].length / 2); // emoji and CJK really are split
      const d = new IncrementalDetokenizer((window) => tok.decode(window), tok.encode('Say hi:'));
      const deltas = ids.map((id) => d.push(id));
      deltas.push(d.flush());
      for (const delta of deltas) expect(delta).not.toContain('\uFFFD');
      expect(deltas.join('')).toBe(tok.decode(ids));
      expect(deltas.join('')).toBe(TEXT);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
