/** Structured-output fixtures shared by the worker and cluster suites. */
/** A schema the tiny random decoder can finish well inside its context (enum, integer, boolean, bounded array). */
export const STRUCTURED_SCHEMA = {
  type: 'object',
  properties: {
    answer: { enum: ['yes', 'no', 'maybe'] },
    count: { type: 'integer' },
    ok: { type: 'boolean' },
    tags: { type: 'array', items: { anyOf: [{ type: 'null' }, { const: 7 }] }, maxItems: 2 },
  },
  required: ['answer', 'count', 'ok', 'tags'],
  additionalProperties: false,
} as const;
