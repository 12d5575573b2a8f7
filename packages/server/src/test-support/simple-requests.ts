/** Test support: request bodies for the fake engine's `simple` model (INT32 [1, 16] + [1, 16]). Not exported. */

export const range = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));
export const i32 = (values: number[]): Buffer => Buffer.from(new Int32Array(values).buffer);

/** A JSON infer request for `simple` (id `r1`; INPUT0 0..15, INPUT1 all 1), with `extra` fields on top. */
export const simpleJson = (extra: object = {}): string =>
  JSON.stringify({
    id: 'r1',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range(16, (i) => i) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: range(16, () => 1) },
    ],
    ...extra,
  });
