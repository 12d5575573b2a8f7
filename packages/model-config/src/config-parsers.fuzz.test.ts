/**
 * Fuzz properties of the two configuration parsers a client can reach: the protobuf text format
 * (`config.pbtxt`, text-tokenizer + text-parser) and the JSON load override (json-parser). For any
 * text they return a ModelConfig or throw invalid_argument within the time bound; map entries keep
 * every key as data, whatever its name.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import protobuf from 'protobufjs';
import { DEEP_NESTING, HOSTILE_KEYS, anyText, eachNodeReplaced, fc, fuzz, fuzzKey, jsonText, mutatedJson, nestedText, parsesOrRefuses, withBigIntLimit, type JsonValue } from '@switchyard/testing/fuzz';
import { parseModelConfigJson } from './json-parser.js';
import { modelConfigProtoRoot } from './schema.js';
import { parseModelConfigText } from './text-parser.js';
import { tokenize } from './text-tokenizer.js';

const EXAMPLES_DIR = new URL('../../../examples/model_repository/', import.meta.url);
const EXAMPLE_CONFIGS = readdirSync(EXAMPLES_DIR)
  .map((model) => {
    try {
      return readFileSync(new URL(`${model}/config.pbtxt`, EXAMPLES_DIR), 'utf8');
    } catch {
      return undefined;
    }
  })
  .filter((text): text is string => text !== undefined);

/** Every field and enum value name of model_config.proto: the words a config is made of. */
function schemaWords(): string[] {
  const words = new Set<string>();
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const o of ns.nestedArray) {
      if (o instanceof protobuf.Type) for (const f of o.fieldsArray) words.add(f.name);
      if (o instanceof protobuf.Enum) for (const v of Object.keys(o.values)) words.add(v);
      if (o instanceof protobuf.Namespace || o instanceof protobuf.Type) walk(o);
    }
  };
  walk(modelConfigProtoRoot());
  return [...words].sort();
}
const WORDS = schemaWords();

/** One token of text format: schema words, hostile identifiers, symbols, numbers of every form, strings with escapes. */
const token = fc.oneof(
  { arbitrary: fc.constantFrom(...WORDS), weight: 8 },
  { arbitrary: fc.constantFrom(...HOSTILE_KEYS, 'true', 'f', 'inf', 'nan', 'key', 'value'), weight: 2 },
  { arbitrary: fc.constantFrom('{', '}', '[', ']', '<', '>', ':', ';', ',', '-', '.', '#'), weight: 6 },
  {
    arbitrary: fc.oneof(
      fc.integer().map(String),
      fc.constantFrom('0x', '0xffffffffffffffffff', '07', '08', '1e', '1.5f', '.5', '99999999999999999999999', '2147483648', '18446744073709551616', '1e400'),
    ),
    weight: 3,
  },
  {
    arbitrary: fc.oneof(
      fc.string({ maxLength: 6 }).map((s) => JSON.stringify(s)),
      fc.constantFrom('"\\x"', '"\\xfff"', '"\\777"', '"\\u12"', '"\\U0010ffff"', '"\\U00110000"', '"\\ud800"', "'a'", '"unterminated', '"\\q"'),
    ),
    weight: 2,
  },
);
const tokenText = fc.array(token, { maxLength: 40 }).map((ts) => ts.join(' '));

/** An example config with a few tokens replaced, removed or inserted (its structure mostly intact). */
const mutatedExample = fc
  .tuple(fc.constantFrom(...EXAMPLE_CONFIGS), fc.array(fc.tuple(fc.nat(), fc.constantFrom('replace', 'remove', 'insert'), token), { minLength: 1, maxLength: 3 }))
  .map(([text, edits]) => {
    const words = text.split(/(\s+)/);
    for (const [at, kind, t] of edits) {
      const i = at % words.length;
      if (kind === 'replace') words[i] = t;
      else if (kind === 'remove') words.splice(i, 1);
      else words.splice(i, 0, ' ', t, ' ');
    }
    return words.join('');
  });

describe('parseModelConfigText (fuzz)', () => {
  it('tokenizes any text or refuses it with a position', () => {
    fuzz(anyText(64), (text) => {
      try {
        tokenize(text);
      } catch (e) {
        expect((e as Error).name).toBe('Error');
        expect((e as Error).message).toMatch(/^\d+:\d+: /);
      }
    });
  });

  it('parses or refuses any text as invalid_argument', () => {
    fuzz(fc.oneof(anyText(64), tokenText), (text) => {
      parsesOrRefuses(() => parseModelConfigText(text));
    });
  });

  it('parses every example config, and parses or refuses it with tokens replaced, removed or inserted', () => {
    for (const text of EXAMPLE_CONFIGS) parseModelConfigText(text);
    fuzz(mutatedExample, (text) => {
      parsesOrRefuses(() => parseModelConfigText(text));
    });
  });

  it('reads an integer literal of any length without a superlinear BigInt parse', () => {
    // BigInt's decimal parse is superlinear: a 3·10^6-digit literal took seconds.
    const fields = fc.constantFrom('max_batch_size', 'dynamic_batching { max_queue_delay_microseconds', 'model_transaction_policy { decoupled', 'optimization { priority');
    fuzz(fc.tuple(fc.integer({ min: 1, max: 200_000 }), fields, fc.boolean()), ([digits, field, negative]) => {
      const close = field.includes('{') ? ' }' : '';
      withBigIntLimit(() => parsesOrRefuses(() => parseModelConfigText(`${field}: ${negative ? '-' : ''}9${'0'.repeat(digits - 1)}${close}`)));
    }, { scale: 0.1 });
  });

  it('reads a string literal of megabytes within the time bound', () => {
    // One encoder call and one array spread per character made a 3·10^6-character literal take over 4 s.
    const piece = fc.constantFrom('0', 'é', '😀', '\\n', '\\x41', '\\101', '\\u00e9');
    fuzz(fc.tuple(fc.integer({ min: 3_000_000, max: 3_500_000 }), fc.array(piece, { minLength: 1, maxLength: 3 })), ([n, pieces]) => {
      const unit = pieces.join('');
      parsesOrRefuses(() => parseModelConfigText(`name: "${'0'.repeat(n)}${unit.repeat(1000)}"`));
    }, { scale: 0.02, timeLimitMs: 2_000 });
  });

  it('keeps every map key as data, whatever its name', () => {
    // text format strings are UTF-8 bytes: a lone surrogate cannot be spelled
    const key = fuzzKey().filter((k) => Buffer.from(k, 'utf8').toString('utf8') === k);
    fuzz(fc.uniqueArray(fc.tuple(key, fc.string({ maxLength: 4 })), { selector: ([k]) => k, maxLength: 3 }), (entries) => {
      const text = entries.map(([k, v]) => `parameters { key: ${JSON.stringify(k)} value { string_value: ${JSON.stringify(v)} } }`).join('\n');
      const r = parsesOrRefuses(() => parseModelConfigText(text));
      if (!r.ok) return; // a key with characters text format cannot spell
      const parameters = r.value.parameters as Record<string, { string_value: string }>;
      expect(Object.getPrototypeOf(parameters)).toBe(Object.prototype);
      expect(Object.entries(parameters).map(([k, v]) => [k, v.string_value]).sort()).toEqual([...entries].sort());
    });
  });
});

describe('parseModelConfigJson (fuzz)', () => {
  const exampleJson = fc.constantFrom(
    '{"name":"m","max_batch_size":8,"input":[{"name":"IN","data_type":"TYPE_FP32","dims":[4]}],"output":[{"name":"OUT","dataType":"TYPE_INT64","dims":["-1"]}]}',
    '{"instance_group":[{"count":2,"kind":"KIND_CPU"}],"dynamic_batching":{"preferred_batch_size":[4,8],"max_queue_delay_microseconds":"100"}}',
    '{"parameters":{"k":{"string_value":"v"}},"version_policy":{"latest":{"num_versions":2}},"sequence_batching":{"oldest":{"max_candidate_sequences":4}}}',
  );

  it('parses or refuses any text and any JSON as invalid_argument', () => {
    fuzz(fc.oneof(fc.string({ maxLength: 32 }), fc.json({ maxDepth: 4 })), (text) => {
      parsesOrRefuses(() => parseModelConfigJson(text));
    });
  });

  it('reads an integer string of any length without a superlinear BigInt parse', () => {
    fuzz(fc.tuple(fc.integer({ min: 1, max: 200_000 }), fc.constantFrom('max_batch_size', 'dynamic_batching":{"max_queue_delay_microseconds')), ([digits, field]) => {
      const close = field.includes('{') ? '}' : '';
      withBigIntLimit(() => parsesOrRefuses(() => parseModelConfigJson(`{"${field}":"9${'0'.repeat(digits - 1)}"${close}}`)));
    }, { scale: 0.1 });
  });

  it('parses or refuses valid overrides with one field corrupted or a hostile key added', () => {
    fuzz(mutatedJson(exampleJson.map((t) => JSON.parse(t) as JsonValue)), (doc) => {
      parsesOrRefuses(() => parseModelConfigJson(jsonText(doc)));
    });
  });

  it('refuses an override with any one value nested 10^5 deep as invalid_argument', () => {
    const valid = JSON.parse(
      '{"name":"m","max_batch_size":8,"input":[{"name":"IN","data_type":"TYPE_FP32","dims":[4]}],"instance_group":[{"count":2,"kind":"KIND_CPU"}],"dynamic_batching":{"preferred_batch_size":[4]},"parameters":{"k":{"string_value":"v"}},"model_transaction_policy":{"decoupled":false}}',
    ) as JsonValue;
    for (const { path, text } of eachNodeReplaced(valid, nestedText(DEEP_NESTING))) {
      const r = parsesOrRefuses(() => parseModelConfigJson(text));
      expect(r.ok, path).toBe(false);
    }
  });

  it('keeps every map key as data, whatever its name', () => {
    fuzz(fc.uniqueArray(fc.tuple(fuzzKey(), fc.string({ maxLength: 4 })), { selector: ([k]) => k, maxLength: 3 }), (entries) => {
      const text = `{"parameters":{${entries.map(([k, v]) => `${JSON.stringify(k)}:{"string_value":${JSON.stringify(v)}}`).join(',')}}}`;
      const parameters = parseModelConfigJson(text).parameters as Record<string, { string_value: string }>;
      expect(Object.getPrototypeOf(parameters)).toBe(Object.prototype);
      expect(Object.entries(parameters).map(([k, v]) => [k, v.string_value]).sort()).toEqual([...entries].sort());
    });
  });
});
