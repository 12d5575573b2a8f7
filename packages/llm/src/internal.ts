export {};
export { specialTokenContent } from './tokenizer/tokenizer-files.js';
export { xxh3_64 } from './xxh3.js';
export { Xoshiro128, argmax, logSoftmaxAt } from './sampling.js';
export { LOGIT_ROWS_OUTPUT, SAMPLED_OUTPUT, SAMPLE_ROWS_INPUT, commitSample, encodeSampleRows, readSampledRows, sampleRows, type RowOutcome, type RowSampling, type SampledRow } from './sampling-rows.js';
export { initialState, step, isAccepting, canContinue, stateKey, type JsonState } from './guided/json-automaton.js';
export { guidedRoot, ANY_OBJECT, ANY_VALUE, type SchemaNode } from './guided/json-schema.js';
export { JsonTokenConstraint } from './guided/token-constraint.js';
export { ReasoningGate } from './guided/reasoning-gate.js';
