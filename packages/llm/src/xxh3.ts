// XXH3_64bits_withSeed, in TypeScript, synchronous.
//
// Contract: `xxh3_64(data, seed)` returns the same 64-bit value as the reference C implementation
// (xxhash 0.8.x, `XXH3_64bits_withSeed`) for every input length and every u64 seed; the tests check it
// against xxHash's own sanity vectors and bit for bit against hash-wasm's WebAssembly build of the C
// code over random lengths covering every branch (0, 1-3, 4-8, 9-16, 17-128, 129-240, >240 with several
// 1 KiB blocks) and random seeds.
//
// Why our own: the project needs ONE block hash shared by the engine and (later) the router, computed
// synchronously inside a scheduler step. hash-wasm is async (WebAssembly instantiation) and is only a
// devDependency used as the oracle.
//
// How: a u64 is a pair of u32 numbers (hi, lo); helpers leave their result in the typed-array
// registers `R` (and `A`, `ACC`) so the hot path allocates nothing and never boxes a double. A first
// version in `bigint` was 4-10x slower. Safe within one thread: no helper calls out to user code.
// Inputs over 240 bytes that sit 4-byte aligned and are a multiple of 4 long (every token block) are
// read as u32 words on little-endian hosts, a pair of accumulator lanes at a time in locals
// (`hashLongWords`: ~15% fewer instructions per 256-byte block than the byte-view path).

/** Result registers: [hi, lo]. A typed array, not `let`s, so writes never box a heap number. */
const R = new Uint32Array(2);

const TWO32 = 4294967296;

/**
 * R = a * b for u32 a, b (exact 64-bit product). The low word is exact from Math.imul; the double
 * product a*b is off by at most 2^11 (half an ulp at 2^64), so (a*b - lo) / 2^32 lies within 2^-20 of
 * the exact high word and rounding recovers it.
 */
function mul32(a: number, b: number): void {
  const lo = Math.imul(a, b) >>> 0;
  R[1] = lo;
  R[0] = Math.round((a * b - lo) / TWO32);
}

/** R = (a * b) mod 2^64. */
function mul64(ah: number, al: number, bh: number, bl: number): void {
  mul32(al, bl);
  R[0] = (R[0]! + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

/** R = low64 ^ high64 of the 128-bit product a * b. */
function mul128Fold64(ah: number, al: number, bh: number, bl: number): void {
  mul32(al, bl);
  const llH = R[0]!;
  const llL = R[1]!;
  mul32(al, bh);
  const lhH = R[0]!;
  const lhL = R[1]!;
  mul32(ah, bl);
  const hlH = R[0]!;
  const hlL = R[1]!;
  mul32(ah, bh);
  const t1 = llH + lhL + hlL;
  const t2 = lhH + hlH + R[1]! + Math.floor(t1 / TWO32);
  const w3 = (R[0]! + Math.floor(t2 / TWO32)) >>> 0;
  R[0] = ((t1 >>> 0) ^ w3) >>> 0;
  R[1] = (llL ^ (t2 >>> 0)) >>> 0;
}

const swap32 = (x: number): number =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;

// Constants as (hi, lo).
const P32_1 = 0x9e3779b1;
const P32_2 = 0x85ebca77;
const P32_3 = 0xc2b2ae3d;
const P64_1H = 0x9e3779b1, P64_1L = 0x85ebca87;
const P64_2H = 0xc2b2ae3d, P64_2L = 0x27d4eb4f;
const P64_3H = 0x165667b1, P64_3L = 0x9e3779f9;
const P64_4H = 0x85ebca77, P64_4L = 0xc2b2ae63;
const P64_5H = 0x27d4eb2f, P64_5L = 0x165667c5;
const MX1H = 0x16566791, MX1L = 0x9e3779f9;
const MX2H = 0x9fb21c65, MX2L = 0x1e98df25;

const STRIPE_LEN = 64;
const SECRET_CONSUME_RATE = 8;
const SECRET_SIZE = 192;
const SECRET_LASTACC_START = 7;
const SECRET_MERGEACCS_START = 11;
const MIDSIZE_STARTOFFSET = 3;
const MIDSIZE_LASTOFFSET = 17;
const SECRET_SIZE_MIN = 136;

/** The default 192-byte secret (kSecret) from xxhash.h. */
const K_SECRET = new Uint8Array([
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
]);
const KS = new DataView(K_SECRET.buffer);

/** Custom secrets for the long path depend only on the seed; the project uses one seed (1337). */
const secretCache = new Map<string, DataView>();

const lo32 = (v: DataView, off: number): number => v.getUint32(off, true);
const hi32 = (v: DataView, off: number): number => v.getUint32(off + 4, true);

/** R = XXH3_avalanche(h:l). */
function avalanche3(h: number, l: number): void {
  l = (l ^ (h >>> 5)) >>> 0;
  mul64(h, l, MX1H, MX1L);
  R[1] = (R[1]! ^ R[0]!) >>> 0;
}

/** R = XXH64_avalanche(h:l). */
function avalanche64(h: number, l: number): void {
  l = (l ^ (h >>> 1)) >>> 0;
  mul64(h, l, P64_2H, P64_2L);
  h = R[0]!;
  l = R[1]!;
  l = (l ^ ((l >>> 29) | (h << 3))) >>> 0;
  h = (h ^ (h >>> 29)) >>> 0;
  mul64(h, l, P64_3H, P64_3L);
  R[1] = (R[1]! ^ R[0]!) >>> 0;
}

/** R = XXH3_rrmxmx(h:l, len). */
function rrmxmx(h: number, l: number, len: number): void {
  const r49h = (l << 17) | (h >>> 15);
  const r49l = (h << 17) | (l >>> 15);
  const r24h = (h << 24) | (l >>> 8);
  const r24l = (l << 24) | (h >>> 8);
  h = (h ^ r49h ^ r24h) >>> 0;
  l = (l ^ r49l ^ r24l) >>> 0;
  mul64(h, l, MX2H, MX2L);
  const s = (R[0]! >>> 3) + len;
  h = (R[0]! ^ (s >= TWO32 ? 1 : 0)) >>> 0;
  l = (R[1]! ^ (s >>> 0)) >>> 0;
  mul64(h, l, MX2H, MX2L);
  R[1] = (R[1]! ^ ((R[1]! >>> 28) | (R[0]! << 4))) >>> 0;
  R[0] = (R[0]! ^ (R[0]! >>> 28)) >>> 0;
}

/** Accumulator of the 17..240-byte paths, [hi, lo]; typed so that writes never box. */
const A = new Uint32Array(2);

/** A += mix16B(input + ip, secret + sp, seed). */
function mix16B(inp: DataView, ip: number, sec: DataView, sp: number, sH: number, sL: number): void {
  // (secret_lo64 + seed) and (secret_hi64 - seed)
  let t = lo32(sec, sp) + sL;
  const aL = (lo32(inp, ip) ^ t) >>> 0;
  const aH = (hi32(inp, ip) ^ (hi32(sec, sp) + sH + (t >= TWO32 ? 1 : 0))) >>> 0;
  t = lo32(sec, sp + 8) - sL;
  const bL = (lo32(inp, ip + 8) ^ t) >>> 0;
  const bH = (hi32(inp, ip + 8) ^ (hi32(sec, sp + 8) - sH - (t < 0 ? 1 : 0))) >>> 0;
  mul128Fold64(aH, aL, bH, bL);
  const l = A[1]! + R[1]!;
  A[0] = A[0]! + R[0]! + (l >= TWO32 ? 1 : 0);
  A[1] = l;
}

function len0to16(inp: DataView, o: number, len: number, sH: number, sL: number): void {
  if (len > 8) {
    let t = ((lo32(KS, 24) ^ lo32(KS, 32)) >>> 0) + sL;
    const f1L = t >>> 0;
    const f1H = (hi32(KS, 24) ^ hi32(KS, 32)) + sH + (t >= TWO32 ? 1 : 0);
    t = ((lo32(KS, 40) ^ lo32(KS, 48)) >>> 0) - sL;
    const f2L = t >>> 0;
    const f2H = (hi32(KS, 40) ^ hi32(KS, 48)) - sH - (t < 0 ? 1 : 0);
    const loL = (lo32(inp, o) ^ f1L) >>> 0;
    const loH = (hi32(inp, o) ^ f1H) >>> 0;
    const hiL = (lo32(inp, o + len - 8) ^ f2L) >>> 0;
    const hiH = (hi32(inp, o + len - 8) ^ f2H) >>> 0;
    mul128Fold64(loH, loL, hiH, hiL);
    // acc = len + swap64(lo) + hi + fold
    const l = len + swap32(loH) + hiL + R[1]!;
    const h = swap32(loL) + hiH + R[0]! + Math.floor(l / TWO32);
    avalanche3(h >>> 0, l >>> 0);
    return;
  }
  if (len >= 4) {
    const seedH = (sH ^ swap32(sL)) >>> 0;
    const in1 = lo32(inp, o);
    const in2 = inp.getUint32(o + len - 4, true);
    const t = ((lo32(KS, 8) ^ lo32(KS, 16)) >>> 0) - sL;
    const fL = t >>> 0;
    const fH = ((hi32(KS, 8) ^ hi32(KS, 16)) - seedH - (t < 0 ? 1 : 0)) >>> 0;
    rrmxmx((in1 ^ fH) >>> 0, (in2 ^ fL) >>> 0, len);
    return;
  }
  if (len > 0) {
    const c1 = inp.getUint8(o);
    const c2 = inp.getUint8(o + (len >> 1));
    const c3 = inp.getUint8(o + len - 1);
    const combined = ((c1 << 16) | (c2 << 24) | c3 | (len << 8)) >>> 0;
    const t = ((lo32(KS, 0) ^ hi32(KS, 0)) >>> 0) + sL;
    const fH = (sH + (t >= TWO32 ? 1 : 0)) >>> 0;
    avalanche64(fH, (combined ^ t) >>> 0);
    return;
  }
  avalanche64((sH ^ hi32(KS, 56) ^ hi32(KS, 64)) >>> 0, (sL ^ lo32(KS, 56) ^ lo32(KS, 64)) >>> 0);
}

function len17to240(inp: DataView, o: number, len: number, sH: number, sL: number): void {
  mul64(0, len, P64_1H, P64_1L);
  A[0] = R[0]!;
  A[1] = R[1]!;
  if (len <= 128) {
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          mix16B(inp, o + 48, KS, 96, sH, sL);
          mix16B(inp, o + len - 64, KS, 112, sH, sL);
        }
        mix16B(inp, o + 32, KS, 64, sH, sL);
        mix16B(inp, o + len - 48, KS, 80, sH, sL);
      }
      mix16B(inp, o + 16, KS, 32, sH, sL);
      mix16B(inp, o + len - 32, KS, 48, sH, sL);
    }
    mix16B(inp, o, KS, 0, sH, sL);
    mix16B(inp, o + len - 16, KS, 16, sH, sL);
    avalanche3(A[0]!, A[1]!);
    return;
  }
  const rounds = len >> 4;
  for (let i = 0; i < 8; i++) {
    mix16B(inp, o + 16 * i, KS, 16 * i, sH, sL);
  }
  avalanche3(A[0]!, A[1]!);
  A[0] = R[0]!;
  A[1] = R[1]!;
  for (let i = 8; i < rounds; i++) {
    mix16B(inp, o + 16 * i, KS, 16 * (i - 8) + MIDSIZE_STARTOFFSET, sH, sL);
  }
  mix16B(inp, o + len - 16, KS, SECRET_SIZE_MIN - MIDSIZE_LASTOFFSET, sH, sL);
  avalanche3(A[0]!, A[1]!);
}

/** The last custom secret used, by seed: every block hash uses the same seed, so no key is built. */
let lastSecret: DataView | undefined;
let lastSecretH = 0;
let lastSecretL = 0;

function customSecret(sH: number, sL: number): DataView {
  if (lastSecret !== undefined && sH === lastSecretH && sL === lastSecretL) return lastSecret;
  const v = customSecretFor(sH, sL);
  lastSecret = v;
  lastSecretH = sH;
  lastSecretL = sL;
  return v;
}

function customSecretFor(sH: number, sL: number): DataView {
  const key = `${sH}:${sL}`;
  let v = secretCache.get(key);
  if (v !== undefined) return v;
  v = new DataView(new ArrayBuffer(SECRET_SIZE));
  for (let i = 0; i < SECRET_SIZE / 16; i++) {
    let t = lo32(KS, 16 * i) + sL;
    v.setUint32(16 * i, t >>> 0, true);
    v.setUint32(16 * i + 4, (hi32(KS, 16 * i) + sH + (t >= TWO32 ? 1 : 0)) >>> 0, true);
    t = lo32(KS, 16 * i + 8) - sL;
    v.setUint32(16 * i + 8, t >>> 0, true);
    v.setUint32(16 * i + 12, (hi32(KS, 16 * i + 8) - sH - (t < 0 ? 1 : 0)) >>> 0, true);
  }
  if (secretCache.size < 16) secretCache.set(key, v);
  return v;
}

/** acc: 8 lanes as [hi, lo] pairs; a Uint32Array so stores wrap modulo 2^32. */
function accumulate512(acc: Uint32Array, inp: DataView, ip: number, sec: DataView, sp: number): void {
  for (let i = 0; i < 8; i++) {
    const dL = lo32(inp, ip + 8 * i);
    const dH = hi32(inp, ip + 8 * i);
    const kL = (dL ^ lo32(sec, sp + 8 * i)) >>> 0;
    const kH = (dH ^ hi32(sec, sp + 8 * i)) >>> 0;
    const j = 2 * (i ^ 1);
    let l = acc[j + 1]! + dL;
    acc[j] = acc[j]! + dH + (l >= TWO32 ? 1 : 0);
    acc[j + 1] = l;
    mul32(kL, kH);
    l = acc[2 * i + 1]! + R[1]!;
    acc[2 * i] = acc[2 * i]! + R[0]! + (l >= TWO32 ? 1 : 0);
    acc[2 * i + 1] = l;
  }
}

function scrambleAcc(acc: Uint32Array, sec: DataView, sp: number): void {
  for (let i = 0; i < 8; i++) {
    const h = acc[2 * i]!;
    const l = (acc[2 * i + 1]! ^ (h >>> 15) ^ lo32(sec, sp + 8 * i)) >>> 0;
    mul64((h ^ hi32(sec, sp + 8 * i)) >>> 0, l, 0, P32_1);
    acc[2 * i] = R[0]!;
    acc[2 * i + 1] = R[1]!;
  }
}

const ACC = new Uint32Array(16);
const ACC_INIT = [0, P32_3, P64_1H, P64_1L, P64_2H, P64_2L, P64_3H, P64_3L, P64_4H, P64_4L, 0, P32_2, P64_5H, P64_5L, 0, P32_1];

function hashLong(inp: DataView, o: number, len: number, sH: number, sL: number): void {
  const sec = sH === 0 && sL === 0 ? KS : customSecret(sH, sL);
  if (LITTLE_ENDIAN && ((inp.byteOffset + o) & 3) === 0 && (len & 3) === 0) {
    hashLongWords(wordsOf(inp), (inp.byteOffset + o) >>> 2, len, sec);
    return;
  }
  const acc = ACC;
  acc.set(ACC_INIT);
  const stripesPerBlock = (SECRET_SIZE - STRIPE_LEN) / SECRET_CONSUME_RATE;
  const blockLen = STRIPE_LEN * stripesPerBlock;
  const blocks = Math.floor((len - 1) / blockLen);
  for (let n = 0; n < blocks; n++) {
    for (let st = 0; st < stripesPerBlock; st++) {
      accumulate512(acc, inp, o + n * blockLen + st * STRIPE_LEN, sec, st * SECRET_CONSUME_RATE);
    }
    scrambleAcc(acc, sec, SECRET_SIZE - STRIPE_LEN);
  }
  const lastStripes = Math.floor((len - 1 - blockLen * blocks) / STRIPE_LEN);
  for (let st = 0; st < lastStripes; st++) {
    accumulate512(acc, inp, o + blocks * blockLen + st * STRIPE_LEN, sec, st * SECRET_CONSUME_RATE);
  }
  accumulate512(acc, inp, o + len - STRIPE_LEN, sec, SECRET_SIZE - STRIPE_LEN - SECRET_LASTACC_START);
  mergeAccs(len, sec);
}

/** R = the long hash's result from the accumulators `ACC`. */
function mergeAccs(len: number, sec: DataView): void {
  const acc = ACC;
  mul64(0, len, P64_1H, P64_1L);
  let aH = R[0]!;
  let aL = R[1]!;
  for (let i = 0; i < 4; i++) {
    const sp = SECRET_MERGEACCS_START + 16 * i;
    mul128Fold64(
      (acc[4 * i]! ^ hi32(sec, sp)) >>> 0,
      (acc[4 * i + 1]! ^ lo32(sec, sp)) >>> 0,
      (acc[4 * i + 2]! ^ hi32(sec, sp + 8)) >>> 0,
      (acc[4 * i + 3]! ^ lo32(sec, sp + 8)) >>> 0,
    );
    const l = aL + R[1]!;
    aH = (aH + R[0]! + (l >= TWO32 ? 1 : 0)) >>> 0;
    aL = l >>> 0;
  }
  avalanche3(aH, aL);
}

/** Typed arrays use the host's byte order: on a little-endian host a Uint32Array reads le_u32 directly. */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The last buffer read as words, and its Uint32Array (one per buffer, not per call). */
let wordsBuffer: ArrayBufferLike | null = null;
let wordsView: Uint32Array<ArrayBufferLike> = new Uint32Array(0);

function wordsOf(v: DataView): Uint32Array {
  if (v.buffer !== wordsBuffer) {
    wordsView = new Uint32Array(v.buffer, 0, v.buffer.byteLength >>> 2);
    wordsBuffer = v.buffer;
  }
  return wordsView;
}

/** A secret's words: `stripes` from byte 0 (the aligned stripe and scramble offsets), `last` from the last stripe's unaligned offset. */
interface SecretWords {
  readonly secret: DataView;
  readonly stripes: Uint32Array;
  readonly last: Uint32Array;
}

let lastWords: SecretWords | undefined;

function secretWords(sec: DataView): SecretWords {
  if (lastWords?.secret === sec) return lastWords;
  const stripes = new Uint32Array(SECRET_SIZE / 4);
  for (let i = 0; i < stripes.length; i++) stripes[i] = sec.getUint32(4 * i, true);
  const last = new Uint32Array(STRIPE_LEN / 4);
  for (let i = 0; i < last.length; i++) last[i] = sec.getUint32(SECRET_SIZE - STRIPE_LEN - SECRET_LASTACC_START + 4 * i, true);
  return (lastWords = { secret: sec, stripes, last });
}

/**
 * hashLong over little-endian words from `w0` (byte length `len`, a multiple of 4): the same hash, read a
 * word at a time. Lanes 2m and 2m + 1 only ever feed each other (each adds the other's input word), and
 * the scramble is per lane, so each pair runs through every stripe on its own with its accumulators in
 * locals, then lands in `ACC` for the merge.
 */
function hashLongWords(inp: Uint32Array, w0: number, len: number, sec: DataView): void {
  const { stripes: ss, last } = secretWords(sec);
  const blockWords = (STRIPE_LEN * ((SECRET_SIZE - STRIPE_LEN) / SECRET_CONSUME_RATE)) / 4;
  const blocks = Math.floor((len - 1) / (4 * blockWords));
  const lastStripes = Math.floor((len - 1 - 4 * blockWords * blocks) / STRIPE_LEN);
  const lastW = w0 + (len - STRIPE_LEN) / 4;
  const scrambleW = (SECRET_SIZE - STRIPE_LEN) / 4;
  const acc = ACC;
  for (let m = 0; m < 4; m++) {
    // lane 2m is (aH, aL), lane 2m + 1 is (bH, bL)
    let aH = ACC_INIT[4 * m]!;
    let aL = ACC_INIT[4 * m + 1]!;
    let bH = ACC_INIT[4 * m + 2]!;
    let bL = ACC_INIT[4 * m + 3]!;
    for (let n = 0; n <= blocks; n++) {
      const stripes = n < blocks ? blockWords / 16 : lastStripes;
      for (let st = 0; st <= stripes; st++) {
        // stripe st of block n; after the last block's stripes, the final stripe (last secret words)
        const final = n === blocks && st === stripes;
        if (st === stripes && !final) break;
        const iw = final ? lastW + 4 * m : w0 + n * blockWords + 16 * st + 4 * m;
        const sk = final ? last : ss;
        const kw = final ? 4 * m : (st * SECRET_CONSUME_RATE) / 4 + 4 * m;
        const d0L = inp[iw]!;
        const d0H = inp[iw + 1]!;
        const d1L = inp[iw + 2]!;
        const d1H = inp[iw + 3]!;
        const k0L = (d0L ^ sk[kw]!) >>> 0;
        const k0H = (d0H ^ sk[kw + 1]!) >>> 0;
        const k1L = (d1L ^ sk[kw + 2]!) >>> 0;
        const k1H = (d1H ^ sk[kw + 3]!) >>> 0;
        // acc[2m] += d[2m + 1] + k0L * k0H; acc[2m + 1] += d[2m] + k1L * k1H (products as in mul32)
        let pl = Math.imul(k0L, k0H) >>> 0;
        let ph = Math.round((k0L * k0H - pl) / TWO32);
        let l = aL + d1L + pl;
        aH = (aH + d1H + ph + Math.floor(l / TWO32)) >>> 0;
        aL = l >>> 0;
        pl = Math.imul(k1L, k1H) >>> 0;
        ph = Math.round((k1L * k1H - pl) / TWO32);
        l = bL + d0L + pl;
        bH = (bH + d0H + ph + Math.floor(l / TWO32)) >>> 0;
        bL = l >>> 0;
      }
      if (n < blocks) {
        // scrambleAcc on both lanes
        let sw = scrambleW + 4 * m;
        let h = (aH ^ ss[sw + 1]!) >>> 0;
        let l = (aL ^ (aH >>> 15) ^ ss[sw]!) >>> 0;
        let pl = Math.imul(l, P32_1) >>> 0;
        aH = (Math.round((l * P32_1 - pl) / TWO32) + Math.imul(h, P32_1)) >>> 0;
        aL = pl;
        sw += 2;
        h = (bH ^ ss[sw + 1]!) >>> 0;
        l = (bL ^ (bH >>> 15) ^ ss[sw]!) >>> 0;
        pl = Math.imul(l, P32_1) >>> 0;
        bH = (Math.round((l * P32_1 - pl) / TWO32) + Math.imul(h, P32_1)) >>> 0;
        bL = pl;
      }
    }
    acc[4 * m] = aH;
    acc[4 * m + 1] = aL;
    acc[4 * m + 2] = bH;
    acc[4 * m + 3] = bL;
  }
  mergeAccs(len, sec);
}

/** Leaves XXH3_64bits_withSeed(bytes [off, off + len) of view, seedHi:seedLo) in R. */
function run(view: DataView, off: number, len: number, sH: number, sL: number): void {
  if (len <= 16) len0to16(view, off, len, sH, sL);
  else if (len <= 240) len17to240(view, off, len, sH, sL);
  else hashLong(view, off, len, sH, sL);
}

/** Lower-case hex digit codes of each nibble. */
const HEX_CODE = Array.from({ length: 16 }, (_, i) => i.toString(16).charCodeAt(0));

/**
 * A u64 given as two u32 halves, as 16 lower-case hex digits (big-endian, zero padded, as `xxhsum`
 * prints it). One string is allocated, nothing else.
 */
export function u64Hex(hi: number, lo: number): string {
  const d = HEX_CODE;
  return String.fromCharCode(
    d[hi >>> 28]!, d[(hi >>> 24) & 15]!, d[(hi >>> 20) & 15]!, d[(hi >>> 16) & 15]!,
    d[(hi >>> 12) & 15]!, d[(hi >>> 8) & 15]!, d[(hi >>> 4) & 15]!, d[hi & 15]!,
    d[lo >>> 28]!, d[(lo >>> 24) & 15]!, d[(lo >>> 20) & 15]!, d[(lo >>> 16) & 15]!,
    d[(lo >>> 12) & 15]!, d[(lo >>> 8) & 15]!, d[(lo >>> 4) & 15]!, d[lo & 15]!,
  );
}

const M64 = (1n << 64n) - 1n;

/**
 * XXH3_64bits_withSeed(data, seed). `seed` is taken modulo 2^64 (negative values wrap, as a C cast
 * would); the result is an unsigned 64-bit `bigint`.
 */
export function xxh3_64(data: Uint8Array, seed: bigint = 0n): bigint {
  const s = seed & M64;
  run(new DataView(data.buffer, data.byteOffset, data.byteLength), 0, data.length, Number(s >> 32n), Number(s & 0xffffffffn));
  return (BigInt(R[0]!) << 32n) | BigInt(R[1]!);
}

/**
 * The same hash of bytes [offset, offset + len) of `view`, with the seed as two u32 halves, written
 * to `out[at]` (high half) and `out[at + 1]` (low half). The allocation-free form for hot callers
 * (block-hash.ts) that keep their own DataView and format hex only where a string is needed.
 */
export function xxh3_64Into(out: Uint32Array, at: number, view: DataView, offset: number, len: number, seedHi: number, seedLo: number): void {
  if (!(offset >= 0 && len >= 0 && offset + len <= view.byteLength)) {
    throw new RangeError(`bytes [${offset}, ${offset + len}) outside the view's ${view.byteLength}`);
  }
  run(view, offset, len, seedHi >>> 0, seedLo >>> 0);
  out[at] = R[0]!;
  out[at + 1] = R[1]!;
}

/** `xxh3_64Into` of the first `len` bytes of `view`, as `u64Hex` digits. */
export function xxh3_64Hex(view: DataView, len: number, seedHi: number, seedLo: number): string {
  if (len > view.byteLength) throw new RangeError(`len ${len} exceeds the view's ${view.byteLength} bytes`);
  run(view, 0, len, seedHi >>> 0, seedLo >>> 0);
  return u64Hex(R[0]!, R[1]!);
}
