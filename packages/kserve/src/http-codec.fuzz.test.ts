/**
 * Fuzz properties of the HTTP door's parsers: the JSON reader, JSON tensor data, the infer codec
 * (JSON + binary extension, raw binary bodies) and the generate extension. For any input they
 * return a value or throw a SwitchyardError of the class Triton reports (`internal` for JSON
 * access problems, `invalid_argument` for request-shape problems), within the time bound.
 */
import { isUtf8 } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { concatBytes, fc, fuzz, fuzzKey, jsonText, mutatedJson, parsesOrRefuses, rawTensor, withBigIntLimit, type JsonValue as FuzzJson } from '@switchyard/testing/fuzz';
import { decodeHttpInferRequest, decodeHttpRawInferRequest, encodeHttpInferResponse, parseInferenceHeaderLength } from './http-codec.js';
import { decodeHttpGenerateRequest } from './http-generate.js';
import { parseJson, stringifyJson, type JsonValue } from './http-json.js';
import { jsonToTensorData, tensorDataToJson } from './json-data.js';
import { DATATYPES, type DataType, type InferResponse } from './protocols.js';
import { MAX_TENSOR_BYTE_SIZE, deserializeBytesElements, elementByteSize, serializeBytesElements } from './tensor.js';

const HTTP_CODES = ['internal', 'invalid_argument'] as const;
const enc = new TextEncoder();
const ELEMENT_SIZES = Object.fromEntries(DATATYPES.map((d) => [d, elementByteSize(d)]));
/** Datatypes JSON `data` can carry (FP16 / BF16 only travel as binary). */
const JSON_DATATYPES = DATATYPES.filter((d) => d !== 'FP16' && d !== 'BF16');

/** One JSON element of `datatype`, in range. */
function jsonElement(datatype: DataType): fc.Arbitrary<FuzzJson> {
  const int = (bits: number, signed: boolean) =>
    signed ? fc.integer({ min: -(2 ** (bits - 1)), max: 2 ** (bits - 1) - 1 }) : fc.integer({ min: 0, max: 2 ** bits - 1 });
  switch (datatype) {
    case 'BOOL':
      return fc.boolean();
    case 'BYTES':
      return fc.string({ maxLength: 6 });
    case 'FP32':
      return fc.float({ noNaN: true, noDefaultInfinity: true });
    case 'FP64':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'INT64':
    case 'UINT64':
      return fc.maxSafeInteger().map((v) => (datatype === 'UINT64' ? Math.abs(v) : v));
    default:
      return int(elementByteSize(datatype) * 8, datatype.startsWith('INT'));
  }
}

const shapeArb = fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 });

/** A valid JSON input (data in `data`, flat or nested by the shape's first dimension). */
const jsonInput = (name: string) =>
  fc.tuple(fc.constantFrom(...JSON_DATATYPES), shapeArb, fc.boolean()).chain(([datatype, shape, nest]) => {
    const count = shape.reduce((n, d) => n * d, 1);
    return fc.array(jsonElement(datatype), { minLength: count, maxLength: count }).map((data): FuzzJson => {
      const rows = shape[0] ?? 1;
      const nestedData = nest && rows > 0 && count > 0 ? Array.from({ length: rows }, (_, r) => data.slice((r * count) / rows, ((r + 1) * count) / rows)) : data;
      return { name, datatype, shape, data: nestedData };
    });
  });

interface BodyParts {
  header: FuzzJson;
  blobs: Uint8Array[];
}

/** A valid infer request: JSON inputs, binary inputs (blobs after the header), parameters, outputs. */
const validRequest: fc.Arbitrary<BodyParts> = fc
  .tuple(
    fc.array(fc.oneof(fc.constant('json' as const), fc.constant('binary' as const)), { minLength: 1, maxLength: 3 }),
    fc.array(rawTensor(ELEMENT_SIZES), { minLength: 3, maxLength: 3 }),
    fc.record({ id: fc.string({ maxLength: 4 }), priority: fc.nat(5), binary: fc.boolean() }),
  )
  .chain(([kinds, tensors, meta]) =>
    fc.tuple(...kinds.map((k, i) => (k === 'json' ? jsonInput(`IN${i}`) : fc.constant(null)))).map((jsonInputs): BodyParts => {
      const blobs: Uint8Array[] = [];
      const inputs = kinds.map((k, i) => {
        if (k === 'json') return jsonInputs[i] as FuzzJson;
        const t = tensors[i % tensors.length]!;
        blobs.push(t.data);
        return { name: `IN${i}`, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.data.byteLength } };
      });
      return {
        header: {
          id: meta.id,
          parameters: { priority: meta.priority, binary_data_output: meta.binary, custom: 'x' },
          inputs,
          outputs: [{ name: 'OUT', parameters: { binary_data: true, classification: 2 } }],
        },
        blobs,
      };
    }),
  );

function body(headerText: string, blobs: readonly Uint8Array[]): { bytes: Uint8Array; headerLength: number } {
  const header = enc.encode(headerText);
  return { bytes: concatBytes([header, ...blobs]), headerLength: header.byteLength };
}

/**
 * Any dimension a client may declare, as JSON text: small, around 2^31, 2^32, 2^53, 2^63 and 2^64
 * (exact, also past 2^53), anything up to 2^70, or negative.
 */
const anyDim: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 0, max: 4 }).map(String),
  fc.constantFrom(2n ** 31n, 2n ** 32n, 2n ** 53n + 1n, 2n ** 62n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n).map(String),
  fc.bigInt({ min: 1n, max: 2n ** 70n }).map(String),
  fc.integer({ min: -(2 ** 31), max: -1 }).map(String),
);

/** External memory held by ArrayBuffers now (a buffer a decoder sized from a shape shows here until collected). */
const arrayBufferBytes = () => process.memoryUsage().arrayBuffers;

/**
 * Request parameters with names the decoders do not reserve: any short well-formed string, hostile
 * keys included (a lone surrogate, written `\ud800` in JSON, is refused as RapidJSON refuses it).
 */
const customParameters = fc.uniqueArray(
  fc.tuple(
    fuzzKey().filter((k) => !/\p{Cs}/u.test(k) && !k.startsWith('triton_') && !['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output'].includes(k)),
    fc.oneof(fc.boolean(), fc.integer(), fc.string({ maxLength: 4 })),
  ),
  { selector: ([k]) => k, maxLength: 4 },
);
const sortedEntries = (o: object) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

describe('parseJson (fuzz)', () => {
  it('reads any bytes as a value or refuses them as internal (bytes that are not UTF-8 included, never decoded with U+FFFD)', () => {
    fuzz(fc.uint8Array({ maxLength: 64 }), (bytes) => {
      const r = parsesOrRefuses(() => parseJson(bytes), ['internal']);
      if (!isUtf8(bytes)) expect(r.ok).toBe(false);
    });
  });

  it('reads any JSON text as JSON.parse does (integers past 2^53 exactly, as bigint)', () => {
    fuzz(fc.json({ maxDepth: 4 }), (text) => {
      const ours = parseJson(text);
      const widen = (v: JsonValue): unknown =>
        typeof v === 'bigint' ? Number(v) : Array.isArray(v) ? v.map(widen) : v !== null && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, widen(x)])) : v;
      expect(widen(ours)).toEqual(JSON.parse(text));
    });
  });

  it('survives hostile nesting without recursion', () => {
    fuzz(fc.integer({ min: 1_000, max: 20_000 }), (depth) => {
      parsesOrRefuses(() => parseJson(`${'['.repeat(depth)}${']'.repeat(depth)}`), ['internal']);
      parsesOrRefuses(() => parseJson(`${'{"a":'.repeat(depth)}1`), ['internal']);
    }, { scale: 0.05 });
  });

  it('reads an integer literal of any length without a superlinear BigInt parse', () => {
    // A 4·10^6-digit literal took seconds in BigInt; a 64 MB body could stall the door.
    fuzz(fc.tuple(fc.integer({ min: 1, max: 200_000 }), fc.boolean()), ([digits, negative]) => {
      // Past 309 digits the value is refused (RapidJSON: "Number too big to be stored in double").
      withBigIntLimit(() => parsesOrRefuses(() => parseJson(`{"a":${negative ? '-' : ''}9${'0'.repeat(digits - 1)}}`), ['internal']));
    }, { scale: 0.1 });
  });
});

describe('jsonToTensorData (fuzz)', () => {
  it('converts or refuses any data for any datatype and small shape', () => {
    const arb = fc.tuple(fc.oneof(fc.constantFrom(...DATATYPES), fc.string({ maxLength: 5 })), shapeArb, fc.jsonValue({ maxDepth: 3 }));
    fuzz(arb, ([datatype, shape, data]) => {
      parsesOrRefuses(() => jsonToTensorData('X', datatype, shape, parseJson(JSON.stringify(data))), HTTP_CODES);
    });
  });

  it('refuses any declared shape its data does not fill without allocating it: huge dimensions as invalid_argument', () => {
    const arb = fc.tuple(fc.constantFrom(...JSON_DATATYPES), fc.array(anyDim, { minLength: 1, maxLength: 4 }));
    fuzz(arb, ([datatype, dims]) => {
      const { bytes, headerLength } = body(`{"inputs":[{"name":"X","datatype":"${datatype}","shape":[${dims.join(',')}],"data":[${datatype === 'BYTES' ? '"a"' : '1'}]}]}`, []);
      const before = arrayBufferBytes();
      const r = parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength), HTTP_CODES);
      expect(arrayBufferBytes() - before).toBeLessThan(1 << 20);
      const count = dims.reduce((n, d) => n * Number(d), 1);
      if (dims.some((d) => BigInt(d) < 0n || BigInt(d) >= 2n ** 64n)) expect(r.ok).toBe(false); // not a uint64 (Triton's AsUInt)
      else if (count > 2 ** 63 - 1 || count * (elementByteSize(datatype) || 4) > MAX_TENSOR_BYTE_SIZE) expect(r.ok || r.error.code).toBe('invalid_argument');
      else if (count > 1 && datatype !== 'BYTES') expect(r.ok).toBe(false); // BYTES counts are the engine's check
    });
  });

  it('round-trips tensor bytes through JSON bit for bit (finite floats, UTF-8 strings)', () => {
    const arb = fc.tuple(fc.constantFrom(...JSON_DATATYPES), shapeArb).chain(([datatype, shape]) => {
      const count = shape.reduce((n, d) => n * d, 1);
      return fc.array(jsonElement(datatype), { minLength: count, maxLength: count }).map((data) => ({ datatype, shape, data }));
    });
    fuzz(arb, ({ datatype, shape, data }) => {
      const bytes = jsonToTensorData('X', datatype, shape, parseJson(JSON.stringify(data)));
      const text = stringifyJson(tensorDataToJson('X', datatype, shape, bytes));
      expect(jsonToTensorData('X', datatype, shape, parseJson(text))).toEqual(bytes);
    });
  });
});

describe('decodeHttpInferRequest (fuzz)', () => {
  it('decodes or refuses any bytes with any header length', () => {
    fuzz(fc.tuple(fc.uint8Array({ maxLength: 96 }), fc.nat()), ([bytes, n]) => {
      parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: undefined, body: bytes }, n % (bytes.byteLength + 1)), HTTP_CODES);
    });
  });

  it('decodes or refuses any JSON document', () => {
    fuzz(fc.json({ maxDepth: 5 }), (text) => {
      const { bytes, headerLength } = body(text, []);
      parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength), HTTP_CODES);
    });
  });

  it('decodes valid requests, and decodes or refuses them with one field corrupted', () => {
    fuzz(validRequest, ({ header, blobs }) => {
      const { bytes, headerLength } = body(JSON.stringify(header), blobs);
      const d = decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength);
      expect(d.request.inputs.length).toBe((header as { inputs: unknown[] }).inputs.length);
    });
    const corrupted = fc
      .tuple(validRequest, fc.nat())
      .chain(([parts, cut]) => mutatedJson(fc.constant(parts.header)).map((header) => ({ header, blobs: parts.blobs, cut })));
    fuzz(corrupted, ({ header, blobs, cut }) => {
      const { bytes, headerLength } = body(jsonText(header), blobs);
      parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength), HTTP_CODES);
      // the same body with its header length wrong
      parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, cut % (bytes.byteLength + 1)), HTTP_CODES);
    });
  });

  it('keeps every custom parameter name as a parameter (__proto__ included)', () => {
    fuzz(customParameters, (entries) => {
      const header = `{"parameters":{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}},"inputs":[]}`;
      const { bytes, headerLength } = body(header, []);
      const parameters = decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength).request.parameters;
      expect(sortedEntries(parameters)).toEqual(sortedEntries(Object.fromEntries(entries)));
      const generate = decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode(`{"parameters":${header.slice(14, header.lastIndexOf(',"inputs"'))}}`) }, []);
      expect(sortedEntries(generate.parameters)).toEqual(sortedEntries(Object.fromEntries(entries)));
    });
  });

  it('refuses binary sizes past the body without allocating them', () => {
    // the body holds 3 bytes
    const sizes = fc.oneof(fc.constantFrom(2 ** 31, 2 ** 32, 2 ** 53, 2 ** 64), fc.integer({ min: 4, max: 2 ** 40 }));
    fuzz(sizes, (size) => {
      const header = `{"inputs":[{"name":"X","datatype":"UINT8","shape":[${size}],"parameters":{"binary_data_size":${size}}}]}`;
      const { bytes, headerLength } = body(header, [new Uint8Array(3)]);
      const r = parsesOrRefuses(() => decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength), HTTP_CODES);
      expect(r.ok).toBe(false);
    });
  });

  it('round-trips binary tensors bit for bit: response encoder → request decoder (NaN payloads, -0)', () => {
    fuzz(fc.array(rawTensor(ELEMENT_SIZES), { minLength: 1, maxLength: 4 }), (tensors) => {
      const response: InferResponse = {
        id: '',
        modelName: 'm',
        modelVersion: '1',
        parameters: {},
        outputs: tensors.map((t, i) => ({ name: `T${i}`, datatype: t.datatype as DataType, shape: t.shape, data: t.data, parameters: {} })),
      };
      const encoded = encodeHttpInferResponse(response, { defaultOutputKind: 'binary', outputs: new Map(), batching: false });
      const [header, ...blobs] = encoded.chunks;
      const json = JSON.parse(new TextDecoder().decode(header)) as { outputs: unknown[] };
      const asRequest = JSON.stringify({ inputs: json.outputs });
      const { bytes, headerLength } = body(asRequest, blobs);
      const decoded = decodeHttpInferRequest({ modelName: 'm', modelVersion: 1, body: bytes }, headerLength).request.inputs;
      expect(decoded.map((t) => [t.name, t.datatype, t.shape])).toEqual(response.outputs.map((t) => [t.name, t.datatype, t.shape]));
      decoded.forEach((t, i) => expect(Buffer.from(t.data).equals(Buffer.from(tensors[i]!.data))).toBe(true));
    });
  });
});

describe('BYTES serialisation (fuzz)', () => {
  it('splits any bytes into elements or refuses them, never reading past the data', () => {
    fuzz(fc.uint8Array({ maxLength: 48 }), (bytes) => {
      const r = parsesOrRefuses(() => deserializeBytesElements(bytes, 'X'));
      if (r.ok) expect(r.value.reduce((n, e) => n + 4 + e.byteLength, 0)).toBe(bytes.byteLength);
    });
  });

  it('round-trips any elements', () => {
    fuzz(fc.array(fc.uint8Array({ maxLength: 8 }), { maxLength: 6 }), (elements) => {
      expect(deserializeBytesElements(serializeBytesElements(elements)).map((e) => Buffer.from(e).toString('hex'))).toEqual(elements.map((e) => Buffer.from(e).toString('hex')));
    });
  });
});

describe('parseInferenceHeaderLength (fuzz)', () => {
  it('returns a length within the body or refuses the header', () => {
    fuzz(fc.tuple(fc.option(fc.string({ maxLength: 24 }), { nil: undefined }), fc.nat(1 << 20)), ([header, contentLength]) => {
      const r = parsesOrRefuses(() => parseInferenceHeaderLength(header, contentLength));
      if (r.ok) expect(r.value >= 0 && r.value <= contentLength).toBe(true);
    });
  });
});

describe('decodeHttpRawInferRequest (fuzz)', () => {
  it('decodes or refuses any body for any model input configuration', () => {
    const dims = fc.array(fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 8 }), fc.constantFrom(2 ** 31, 2 ** 53)), { maxLength: 4 });
    const model = fc.record({
      inputs: fc.array(fc.record({ name: fc.string({ maxLength: 3 }), datatype: fc.constantFrom(...DATATYPES), dims }), { maxLength: 2 }),
      maxBatchSize: fc.nat(8),
    });
    fuzz(fc.tuple(model, fc.uint8Array({ maxLength: 64 })), ([m, bytes]) => {
      parsesOrRefuses(() => decodeHttpRawInferRequest({ modelName: 'm', modelVersion: undefined, body: bytes }, m));
    });
  });
});

describe('decodeHttpGenerateRequest (fuzz)', () => {
  const metadata = fc.array(
    fc.record({
      name: fc.constantFrom('text_input', 'IN', 'stream', 'parameters'),
      datatype: fc.oneof(fc.constantFrom(...DATATYPES), fc.constant('NOPE')),
      shape: fc.array(fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 4 })), { maxLength: 3 }),
    }),
    { maxLength: 3 },
  );
  const validBody: fc.Arbitrary<FuzzJson> = fc.record({
    text_input: fc.string({ maxLength: 8 }),
    IN: fc.array(fc.integer({ min: 0, max: 100 }), { maxLength: 6 }),
    parameters: fc.record({ max_tokens: fc.nat(16), temperature: fc.double({ min: 0, max: 2, noNaN: true }), stream: fc.boolean() }),
  });

  it('decodes or refuses any body, valid or with one field corrupted, against any input metadata', () => {
    const bodies = fc.oneof(fc.json({ maxDepth: 4 }), mutatedJson(validBody).map(jsonText), validBody.map((v) => JSON.stringify(v)));
    fuzz(fc.tuple(metadata, bodies), ([inputs, text]) => {
      parsesOrRefuses(() => decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode(text) }, inputs), HTTP_CODES);
    });
  });

  it('refuses deep nesting in an input with the depth limit, not a stack overflow', () => {
    fuzz(fc.integer({ min: 101, max: 5_000 }), (depth) => {
      const text = `{"IN":${'['.repeat(depth)}1${']'.repeat(depth)}}`;
      const r = parsesOrRefuses(() => decodeHttpGenerateRequest({ modelName: 'm', modelVersion: undefined, body: enc.encode(text) }, [{ name: 'IN', datatype: 'INT32', shape: [-1] }]), HTTP_CODES);
      expect(r.ok).toBe(false);
    }, { scale: 0.1 });
  });
});
