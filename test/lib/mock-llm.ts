/** mock_llm (test/fixtures/llm_repository) in fault suites: slowed down, and its text computed ahead. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SimulatedExecutor, type Tokenizer } from '@switchyard/llm';
import { repoRoot } from '@switchyard/testing';

/** mock_llm's config.pbtxt at speedup_ratio 2 instead of 50, so that a 200-token stream lasts long enough to be cut. */
export const SLOW_MOCK_CONFIG = readFileSync(join(repoRoot(), 'test/fixtures/llm_repository/mock_llm/config.pbtxt'), 'utf8').replace(
  /\{ key: "speedup_ratio" value: \{ string_value: "50" \} \}/,
  '{ key: "speedup_ratio" value: { string_value: "2" } }',
);

/**
 * The text mock_llm generates for the router request `id` (worker engine id `<id>#<id>`): its tokens
 * are a function of (request id, position), from position `promptTokens` on.
 */
export function mockerText(tokenizer: Tokenizer, id: string, promptTokens: number, completionTokens: number): string {
  const sim = new SimulatedExecutor({ vocabSize: tokenizer.vocabSize });
  const ids = Array.from({ length: completionTokens }, (_, i) => sim.tokenAt(`${id}#${id}`, promptTokens + i));
  return tokenizer.decode(ids, { skipSpecialTokens: true });
}
