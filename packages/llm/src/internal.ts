export {};
export { specialTokenContent } from './tokenizer-files.js';
export { xxh3_64 } from './xxh3.js';
export { Xoshiro128, argmax, logSoftmaxAt } from './sampling.js';
