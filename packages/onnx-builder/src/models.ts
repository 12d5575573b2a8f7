/**
 * The concrete models of the example and fixture repositories. Each function returns the bytes of
 * a `model.onnx`; they are pure and deterministic (weights come from a seeded PRNG).
 *
 * Shapes follow Triton's convention for the config beside the file: a model served with
 * `max_batch_size > 0` has a leading symbolic 'batch' dimension in ONNX that its config.pbtxt
 * leaves out of `dims`.
 */
import type { ElemTypeName } from './elem-type.js';
import { GraphBuilder, type Dim } from './graph-builder.js';
import { mulberry32, uniformFloats } from './prng.js';

/** The symbolic name given to the batch dimension. */
export const BATCH_DIM = 'batch';

export interface SimpleModelOptions {
  /** Element type of all four tensors. Default 'INT32'. */
  elemType?: ElemTypeName;
  /** Shape of every tensor, in ONNX terms (include the batch dim). Default ['batch', 16]. */
  dims?: readonly Dim[];
  graphName?: string;
}

/**
 * Triton's `simple`: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (element-wise, same type).
 * ORT CPU has Add/Sub kernels for every integer and float type used here (int8 included).
 */
export function buildSimpleModel(options: SimpleModelOptions = {}): Uint8Array {
  const type = options.elemType ?? 'INT32';
  const dims = options.dims ?? [BATCH_DIM, 16];
  return new GraphBuilder(options.graphName ?? 'simple')
    .input('INPUT0', type, dims)
    .input('INPUT1', type, dims)
    .output('OUTPUT0', type, dims)
    .output('OUTPUT1', type, dims)
    .node('Add', ['INPUT0', 'INPUT1'], ['OUTPUT0'])
    .node('Sub', ['INPUT0', 'INPUT1'], ['OUTPUT1'])
    .buildModel();
}

/**
 * Triton's `simple_string`: INPUT0/INPUT1 are strings holding decimal integers; OUTPUT0/OUTPUT1
 * are their sum/difference as decimal strings. ONNX Cast parses STRING → INT32 and prints
 * INT32 → STRING. A string that is not a number makes ORT fail the run.
 */
export function buildSimpleStringModel(dims: readonly Dim[] = [BATCH_DIM, 16]): Uint8Array {
  return new GraphBuilder('simple_string')
    .input('INPUT0', 'STRING', dims)
    .input('INPUT1', 'STRING', dims)
    .output('OUTPUT0', 'STRING', dims)
    .output('OUTPUT1', 'STRING', dims)
    .node('Cast', ['INPUT0'], ['in0_int'], { to: 6 })
    .node('Cast', ['INPUT1'], ['in1_int'], { to: 6 })
    .node('Add', ['in0_int', 'in1_int'], ['sum_int'])
    .node('Sub', ['in0_int', 'in1_int'], ['diff_int'])
    .node('Cast', ['sum_int'], ['OUTPUT0'], { to: 8 })
    .node('Cast', ['diff_int'], ['OUTPUT1'], { to: 8 })
    .buildModel();
}

/** OUTPUT0 = Identity(INPUT0); default shape ['batch', -1] (a batched model with dims [-1]). */
export function buildIdentityModel(elemType: ElemTypeName, dims: readonly Dim[] = [BATCH_DIM, -1]): Uint8Array {
  return new GraphBuilder(`identity_${elemType.toLowerCase()}`)
    .input('INPUT0', elemType, dims)
    .output('OUTPUT0', elemType, dims)
    .node('Identity', ['INPUT0'], ['OUTPUT0'])
    .buildModel();
}

/**
 * OUTPUT0 = INPUT0 + `addend` (FLOAT), e.g. the version number in `multi_version`, so a response
 * shows which version served it. Default shape ['batch', 4].
 */
export function buildAddConstantModel(addend: number, dims: readonly Dim[] = [BATCH_DIM, 4]): Uint8Array {
  return new GraphBuilder('add_constant')
    .input('INPUT0', 'FLOAT', dims)
    .output('OUTPUT0', 'FLOAT', dims)
    .initializer('ADDEND', 'FLOAT', [], [addend])
    .node('Add', ['INPUT0', 'ADDEND'], ['OUTPUT0'])
    .buildModel();
}

export interface MlpModelOptions {
  /** Features in and out of every layer. Default 256. */
  width?: number;
  /** Number of MatMul + Add + Relu layers. Default 3. */
  layers?: number;
  /** PRNG seed for the weights. Default 42. */
  seed?: number;
}

/**
 * A benchmark MLP: INPUT0 FLOAT ['batch', width] → layers × (MatMul W[width,width] + Add b + Relu)
 * → OUTPUT0 FLOAT ['batch', width]. Weights are Glorot-uniform from `seed`, biases small, so
 * activations stay finite for inputs of order 1.
 */
export function buildMlpModel(options: MlpModelOptions = {}): Uint8Array {
  const width = options.width ?? 256;
  const layers = options.layers ?? 3;
  const next = mulberry32(options.seed ?? 42);
  const g = new GraphBuilder('mlp')
    .input('INPUT0', 'FLOAT', [BATCH_DIM, width])
    .output('OUTPUT0', 'FLOAT', [BATCH_DIM, width]);
  const limit = Math.sqrt(6 / (width + width));
  let x = 'INPUT0';
  for (let l = 0; l < layers; l++) {
    const last = l === layers - 1;
    g.initializer(`W${l}`, 'FLOAT', [width, width], uniformFloats(next, width * width, limit));
    g.initializer(`B${l}`, 'FLOAT', [width], uniformFloats(next, width, 0.1));
    g.node('MatMul', [x, `W${l}`], [`mm${l}`]);
    g.node('Add', [`mm${l}`, `B${l}`], [`add${l}`]);
    x = last ? 'OUTPUT0' : `relu${l}`;
    g.node('Relu', [`add${l}`], [x]);
  }
  return g.buildModel();
}

/**
 * Triton's `simple_sequence` example with its client's numbers: INPUT, START and READY are INT32
 * ['batch', 1] (START / READY are the sequence batcher's controls, `int32_false_true: [0, 1]`);
 * OUTPUT = READY * (INPUT + START), so a sequence's first request answers its input + 1 and every
 * later one its input, and filler slots (READY 0) produce 0.
 */
export function buildSimpleSequenceModel(): Uint8Array {
  const dims = [BATCH_DIM, 1];
  return new GraphBuilder('simple_sequence')
    .input('INPUT', 'INT32', dims)
    .input('START', 'INT32', dims)
    .input('READY', 'INT32', dims)
    .output('OUTPUT', 'INT32', dims)
    .node('Add', ['INPUT', 'START'], ['sum'])
    .node('Mul', ['sum', 'READY'], ['OUTPUT'])
    .buildModel();
}

/**
 * Triton's `simple_dyna_sequence` example (oldest strategy) with its client's numbers: INPUT,
 * START, END, READY INT32 ['batch', 1] and CORRID UINT64 ['batch', 1];
 * OUTPUT = READY * (INPUT + START + END * int32(CORRID)): input + 1 on the first request, input
 * + correlation id on the last, the input in between.
 */
export function buildSimpleDynaSequenceModel(): Uint8Array {
  const dims = [BATCH_DIM, 1];
  return new GraphBuilder('simple_dyna_sequence')
    .input('INPUT', 'INT32', dims)
    .input('START', 'INT32', dims)
    .input('END', 'INT32', dims)
    .input('READY', 'INT32', dims)
    .input('CORRID', 'UINT64', dims)
    .output('OUTPUT', 'INT32', dims)
    .node('Cast', ['CORRID'], ['corrid_int'], { to: 6 })
    .node('Mul', ['corrid_int', 'END'], ['corrid_at_end'])
    .node('Add', ['INPUT', 'START'], ['with_start'])
    .node('Add', ['with_start', 'corrid_at_end'], ['sum'])
    .node('Mul', ['sum', 'READY'], ['OUTPUT'])
    .buildModel();
}

/** The example text pipeline's sizes and classes (the tokenizer and postprocess models agree). */
export const TEXT_CLASSIFIER = {
  vocabSize: 1024,
  sequenceLength: 16,
  embeddingDim: 8,
  labels: ['negative', 'neutral', 'positive'],
} as const;

/** Words the example classifier's weights know, by class index (0 negative, 2 positive). */
const TEXT_LEXICON: Readonly<Record<number, readonly string[]>> = {
  0: ['bad', 'terrible', 'awful', 'hate', 'hated', 'worst', 'boring', 'poor', 'horrible', 'disappointing', 'sad', 'waste'],
  2: ['good', 'great', 'excellent', 'love', 'loved', 'wonderful', 'best', 'amazing', 'enjoyed', 'fantastic', 'happy', 'brilliant'],
};

/**
 * The token id of a lowercased word: 32-bit FNV-1a of its UTF-8 bytes, folded into
 * 1..vocabSize-1 (0 is padding). The example `tokenizer` model computes the same function.
 */
export function textTokenId(word: string, vocabSize: number = TEXT_CLASSIFIER.vocabSize): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(word)) h = Math.imul(h ^ byte, 0x01000193) >>> 0;
  return 1 + (h % (vocabSize - 1));
}

/**
 * The example text classifier: TOKENS INT64 ['batch', 16] → Gather(EMBEDDING[1024, 8]) →
 * ReduceMean over the tokens → MatMul W[8, 3] + B → Softmax → PROBABILITIES FLOAT ['batch', 3]
 * (negative, neutral, positive). Weights are small seeded noise, plus a lexicon: embedding
 * dimension 0 carries negative words, 2 positive ones, W reads them into their classes, and
 * the bias leans to neutral. Row 0 (padding) is zero.
 */
export function buildTextClassifierModel(seed = 7): Uint8Array {
  const { vocabSize, sequenceLength, embeddingDim, labels } = TEXT_CLASSIFIER;
  const next = mulberry32(seed);
  const embedding = uniformFloats(next, vocabSize * embeddingDim, 0.1);
  embedding.fill(0, 0, embeddingDim);
  for (const [cls, words] of Object.entries(TEXT_LEXICON)) {
    for (const word of words) {
      const at = textTokenId(word) * embeddingDim + Number(cls);
      embedding[at] = (embedding[at] ?? 0) + 4;
    }
  }
  const weights = uniformFloats(next, embeddingDim * labels.length, 0.5);
  for (let c = 0; c < labels.length; c++) weights[c * labels.length + c] = 8;
  return new GraphBuilder('text_classifier')
    .input('TOKENS', 'INT64', [BATCH_DIM, sequenceLength])
    .output('PROBABILITIES', 'FLOAT', [BATCH_DIM, labels.length])
    .initializer('EMBEDDING', 'FLOAT', [vocabSize, embeddingDim], embedding)
    .initializer('W', 'FLOAT', [embeddingDim, labels.length], weights)
    .initializer('B', 'FLOAT', [labels.length], [0, 0.5, 0])
    .node('Gather', ['EMBEDDING', 'TOKENS'], ['embedded'], { axis: 0 })
    .node('ReduceMean', ['embedded'], ['pooled'], { axes: [1], keepdims: 0 })
    .node('MatMul', ['pooled', 'W'], ['scores'])
    .node('Add', ['scores', 'B'], ['logits'])
    .node('Softmax', ['logits'], ['PROBABILITIES'], { axis: -1 })
    .buildModel();
}
