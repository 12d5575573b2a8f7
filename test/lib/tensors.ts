/** Little helpers to build and read tensors in tests. */
export const int32Bytes = (values: number[]): Buffer => Buffer.from(new Int32Array(values).buffer);
export const fp32Bytes = (values: number[]): Buffer => Buffer.from(new Float32Array(values).buffer);
export const readInt32 = (b: Uint8Array): number[] => Array.from(new Int32Array(Uint8Array.from(b).buffer));
export const readFp32 = (b: Uint8Array): number[] => Array.from(new Float32Array(Uint8Array.from(b).buffer));
export const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));

/** Triton's BYTES serialisation: 4-byte little-endian length, then the bytes. */
export function serializeStrings(values: string[]): Buffer {
  return Buffer.concat(
    values.flatMap((v) => {
      const b = Buffer.from(v, 'utf8');
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.length);
      return [len, b];
    }),
  );
}

export function deserializeStrings(data: Uint8Array): string[] {
  const b = Buffer.from(data);
  const out: string[] = [];
  for (let off = 0; off < b.length; ) {
    const len = b.readUInt32LE(off);
    out.push(b.subarray(off + 4, off + 4 + len).toString('utf8'));
    off += 4 + len;
  }
  return out;
}

/** POST helper over fetch that returns status, headers and the raw body. */
export async function post(url: string, body: string | Uint8Array | object | undefined, headers: Record<string, string> = {}) {
  const payload = body === undefined ? undefined : typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  const res = await fetch(url, { method: 'POST', body: payload as string | Uint8Array | undefined, headers });
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: buf, json: () => JSON.parse(buf.toString('utf8')) };
}

export async function get(url: string) {
  const res = await fetch(url);
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: buf, json: () => JSON.parse(buf.toString('utf8')) };
}

/** The JSON payloads of the `data: ` events of a server-sent-events body, in order. */
export function serverSentEvents(body: Buffer): any[] {
  return body
    .toString('utf8')
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => JSON.parse(e.slice(6)));
}
