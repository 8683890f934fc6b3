/**
 * Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", Random123), in exact
 * 32-bit integer math, and the counter layout of DESIGN.md §6: key = (seed lo32, seed hi32),
 * counter = (a, b lo32, b hi32, purpose). The native backends use the same function; the
 * known-answer vectors of Random123 are checked in test/foundation/philox.test.ts.
 */

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** Philox purposes (DESIGN.md §6). SYNTHETIC is used only by the synthetic market generator. */
export const PURPOSE = {
  RESET: 1,
  EXPLORE_BRANCH_0: 2,
  EXPLORE_BRANCH_1: 3,
  EXPLORE_BRANCH_2: 4,
  SAMPLE: 8,
  INIT: 9,
  SYNTHETIC: 16,
} as const;

/** High 32 bits of the 64-bit product of two uint32 values. */
function mulhi32(a: number, b: number): number {
  const al = a & 0xffff;
  const ah = a >>> 16;
  const bl = b & 0xffff;
  const bh = b >>> 16;
  const ll = al * bl;
  const lh = al * bh;
  const hl = ah * bl;
  const hh = ah * bh;
  const mid = (ll >>> 16) + (lh & 0xffff) + (hl & 0xffff);
  return (hh + (lh >>> 16) + (hl >>> 16) + (mid >>> 16)) >>> 0;
}

/**
 * out = Philox-4x32-10(counter, key). `out` may be passed to avoid an allocation.
 * counter: 4 uint32 words, key: 2 uint32 words.
 */
export function philox4x32_10(
  counter: ArrayLike<number>,
  key: ArrayLike<number>,
  out: Uint32Array = new Uint32Array(4),
): Uint32Array {
  let c0 = (counter[0] ?? 0) >>> 0;
  let c1 = (counter[1] ?? 0) >>> 0;
  let c2 = (counter[2] ?? 0) >>> 0;
  let c3 = (counter[3] ?? 0) >>> 0;
  let k0 = (key[0] ?? 0) >>> 0;
  let k1 = (key[1] ?? 0) >>> 0;
  for (let round = 0; round < 10; round++) {
    if (round > 0) {
      k0 = (k0 + W0) >>> 0;
      k1 = (k1 + W1) >>> 0;
    }
    const hi0 = mulhi32(M0, c0);
    const lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi32(M1, c2);
    const lo1 = Math.imul(M1, c2) >>> 0;
    c0 = (hi1 ^ c1 ^ k0) >>> 0;
    c1 = lo1;
    c2 = (hi0 ^ c3 ^ k1) >>> 0;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
  return out;
}

const scratchCtr = new Uint32Array(4);
const scratchKey = new Uint32Array(2);

/** The §6 draw: philox(key = seed, counter = {a, b lo, b hi, purpose}). */
export function philoxDraw(
  seed: bigint,
  a: number,
  b: bigint,
  purpose: number,
  out: Uint32Array = new Uint32Array(4),
): Uint32Array {
  scratchKey[0] = Number(seed & 0xffffffffn);
  scratchKey[1] = Number((seed >> 32n) & 0xffffffffn);
  scratchCtr[0] = a >>> 0;
  scratchCtr[1] = Number(b & 0xffffffffn);
  scratchCtr[2] = Number((b >> 32n) & 0xffffffffn);
  scratchCtr[3] = purpose >>> 0;
  return philox4x32_10(scratchCtr, scratchKey, out);
}

/** `(uint64)u * n >> 32`: a uint32 mapped onto 0..n-1 (n < 2^32), exactly as the native code does. */
export function scaleU32(u: number, n: number): number {
  return Number((BigInt(u >>> 0) * BigInt(n)) >> 32n);
}

/**
 * A sequential stream of uniform/normal draws for data generation: counter = (i lo, i hi, stream,
 * purpose), i incremented per block of 4 words. Deterministic for (seed, stream).
 */
export class PhiloxStream {
  private readonly key: Uint32Array;
  private readonly ctr = new Uint32Array(4);
  private readonly block = new Uint32Array(4);
  private used = 4;
  private index = 0;
  private spare: number | undefined = undefined;

  constructor(seed: number | bigint, stream: number, purpose: number = PURPOSE.SYNTHETIC) {
    const s = BigInt(seed);
    this.key = new Uint32Array([Number(s & 0xffffffffn), Number((s >> 32n) & 0xffffffffn)]);
    this.ctr[2] = stream >>> 0;
    this.ctr[3] = purpose >>> 0;
  }

  /** Next raw uint32. */
  u32(): number {
    if (this.used === 4) {
      this.ctr[0] = this.index % 0x100000000;
      this.ctr[1] = Math.floor(this.index / 0x100000000);
      this.index++;
      philox4x32_10(this.ctr, this.key, this.block);
      this.used = 0;
    }
    return this.block[this.used++] as number;
  }

  /** Uniform in (0, 1), never 0 or 1. */
  uniform(): number {
    return (this.u32() + 0.5) / 4294967296;
  }

  /** Standard normal (Box-Muller, pairs cached). */
  normal(): number {
    if (this.spare !== undefined) {
      const v = this.spare;
      this.spare = undefined;
      return v;
    }
    const u1 = this.uniform();
    const u2 = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u1));
    this.spare = r * Math.sin(2 * Math.PI * u2);
    return r * Math.cos(2 * Math.PI * u2);
  }
}
