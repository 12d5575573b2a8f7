// KServe HTTP JSON tensor data: what our request decoder and response encoder cost beside the
// native JSON.parse / JSON.stringify of the same text (the floor any JSON server pays), per datatype.
// A program, not a test. In process, no servers: machine noise moves both columns alike.
//
// Each row is one request body with one [1, 1024] input of that datatype (decodeHttpInferRequest:
// the JSON read, checked and turned into tensor bytes) and one response with that output as JSON
// data (encodeHttpInferResponse), against JSON.parse of the request text and JSON.stringify of the
// response's parsed text. FP32 comes twice: random floats (no integral value) and with whole numbers
// among them (zeros, as ReLU outputs and padding have), whose double-or-integer literals need reading.
// Rounds alternate ours and native; medians.
//
//   node bench/json-codec.mjs [--quick]     (after `npm run build`)
import { fileURLToPath } from 'node:url';
import { decodeHttpInferRequest, encodeHttpInferResponse } from '@switchyard/kserve';

const N = 1024;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Datatype, data (JSON values) for each row. */
const CASES = [
  ['FP32', 'FP32', Array.from(Float32Array.from({ length: N }, (_, i) => Math.sin(i * 0.37) + 0.001))],
  ['FP32 with zeros', 'FP32', Array.from(Float32Array.from({ length: N }, (_, i) => (i % 4 === 0 ? 0 : Math.sin(i * 0.37) + 0.001)))],
  ['INT32', 'INT32', Array.from({ length: N }, (_, i) => ((i * 7919) % 60000) - 30000)],
  ['INT64', 'INT64', Array.from({ length: N }, (_, i) => i * 1_000_003 - 500_000_000)],
  ['UINT8', 'UINT8', Array.from({ length: N }, (_, i) => (i * 31) % 256)],
  ['BOOL', 'BOOL', Array.from({ length: N }, (_, i) => i % 3 === 0)],
  ['BYTES', 'BYTES', Array.from({ length: N }, (_, i) => `token ${i} é`)],
];

/** µs per call of `f` over `calls` calls. */
function perCall(f, calls) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) f();
  return Number(process.hrtime.bigint() - t0) / 1000 / calls;
}

export function measureJsonCodec({ quick = false } = {}) {
  const rounds = quick ? 3 : 7;
  const calls = quick ? 200 : 1000;
  const rows = [];
  for (const [label, datatype, data] of CASES) {
    const text = JSON.stringify({ inputs: [{ name: 'X', shape: [1, N], datatype, data }] });
    const body = Buffer.from(text);
    const decode = () => decodeHttpInferRequest({ modelName: 'm', modelVersion: undefined, body }, body.length);
    const input = decode().request.inputs[0];
    const response = { id: '', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [{ name: 'Y', datatype, shape: [1, N], data: input.data, parameters: {} }] };
    const encode = () => encodeHttpInferResponse(response, { defaultOutputKind: 'json', outputs: new Map(), batching: false });
    const encoded = Buffer.concat(encode().chunks).toString();
    // the same values both ways, or the comparison means nothing
    const back = JSON.parse(encoded).outputs[0].data;
    if (back.length !== N || back.some((v, i) => (typeof v === 'number' ? v !== Number(data[i]) : v !== data[i]))) throw new Error(`${label}: the response does not hold the request's values`);
    const parsed = JSON.parse(encoded);
    const nativeParse = () => JSON.parse(text);
    const nativeStringify = () => JSON.stringify(parsed);
    for (const f of [decode, encode, nativeParse, nativeStringify]) perCall(f, calls / 4);
    const t = { decode: [], encode: [], parse: [], stringify: [] };
    for (let r = 0; r < rounds; r++) {
      t.decode.push(perCall(decode, calls));
      t.parse.push(perCall(nativeParse, calls));
      t.encode.push(perCall(encode, calls));
      t.stringify.push(perCall(nativeStringify, calls));
    }
    rows.push({
      data: label,
      'decode us': +median(t.decode).toFixed(1),
      'JSON.parse us': +median(t.parse).toFixed(1),
      'decode/parse': +(median(t.decode) / median(t.parse)).toFixed(2),
      'encode us': +median(t.encode).toFixed(1),
      'JSON.stringify us': +median(t.stringify).toFixed(1),
      'encode/stringify': +(median(t.encode) / median(t.stringify)).toFixed(2),
    });
  }
  console.log(`\nHTTP JSON tensor data, [1, ${N}] per request: our decoder and encoder beside JSON.parse / JSON.stringify of the same text (in process)`);
  console.table(rows);
  return { elements: N, rows };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) measureJsonCodec({ quick: process.argv.includes('--quick') });
