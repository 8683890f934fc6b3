/**
 * Prioritised replay of the native library (fh_per_*, the sum tree the trainer uses): exact
 * proportional sampling by a chi-square test over many stratified draws, importance weights and
 * priority updates against hand computation, duplicates taking the max, and no drift of the sums.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import type { NativeLib, PerHandle } from '../../src/native/binding.js';
import { lib, rng } from './helpers.js';

function withPer(capacity: number, alpha: number, seed: number, fn: (l: NativeLib, p: PerHandle) => void): void {
  const l = lib();
  const out: [PerHandle | null] = [null];
  expect(l.fh_per_create(capacity, alpha, seed, out)).toBe(FhStatus.OK);
  const p = out[0] as PerHandle;
  try {
    fn(l, p);
  } finally {
    l.fh_per_destroy(p);
  }
}

function setAll(l: NativeLib, p: PerHandle, pri: Float32Array): void {
  const idx = BigInt64Array.from(pri, (_, i) => BigInt(i));
  expect(l.fh_per_set(p, pri.length, idx, pri)).toBe(FhStatus.OK);
}

function total(l: NativeLib, p: PerHandle): number {
  const out: [number] = [0];
  expect(l.fh_per_total(p, out)).toBe(FhStatus.OK);
  return out[0];
}

/** Chi-square statistic of observed counts vs expected probabilities. */
function chiSquare(counts: number[], probs: number[], n: number): number {
  let chi = 0;
  for (let i = 0; i < counts.length; i++) {
    const e = (probs[i] as number) * n;
    if (e > 0) chi += ((counts[i] as number) - e) ** 2 / e;
  }
  return chi;
}

describe('native PER', () => {
  test('sampling frequencies are proportional to p^alpha (chi-square over 64k samples)', () => {
    const C = 64;
    const alpha = 0.6;
    withPer(C, alpha, 5, (l, p) => {
      const r = rng(3);
      const pri = Float32Array.from({ length: C }, () => 0.05 + 5 * r());
      setAll(l, p, pri);
      const stored = Array.from(pri, (x) => Math.fround(Math.pow(x, Math.fround(alpha)))); // alpha is a C float
      const sum = stored.reduce((a, b) => a + b, 0);
      expect(total(l, p)).toBeCloseTo(sum, 9);
      const probs = stored.map((x) => x / sum);
      const B = 32;
      const draws = 2000;
      const counts = new Array<number>(C).fill(0);
      const idx = new BigInt64Array(B);
      const w = new Float32Array(B);
      for (let d = 0; d < draws; d++) {
        expect(l.fh_per_sample(p, B, d, 0.4, idx, w)).toBe(FhStatus.OK);
        for (let j = 0; j < B; j++) {
          const i = Number(idx[j]);
          counts[i] = (counts[i] as number) + 1;
          // stratified: sample j comes from stratum j, so indices never decrease within a batch
          if (j > 0) expect(i).toBeGreaterThanOrEqual(Number(idx[j - 1]));
        }
      }
      const n = B * draws;
      // df = 63: the 0.999 quantile is 103.4
      const chi = chiSquare(counts, probs, n);
      expect(chi).toBeLessThan(103.4);
      // the test has power: the same counts are far from proportional-to-p (alpha ignored)
      const psum = pri.reduce((a, b) => a + b, 0);
      expect(chiSquare(counts, Array.from(pri, (x) => x / psum), n)).toBeGreaterThan(1000);
    });
  });

  test('importance weights equal (size*P(i))^-beta / batch max, by hand', () => {
    withPer(100, 0.7, 9, (l, p) => {
      const pri = new Float32Array(100);
      const r = rng(4);
      for (let i = 0; i < 100; i++) pri[i] = i % 4 === 0 ? 0 : 0.1 + r() * 3; // a quarter never sampleable
      setAll(l, p, pri);
      const stored = Array.from(pri, (x) => (x > 0 ? Math.fround(Math.pow(x, Math.fround(0.7))) : 0));
      const sum = stored.reduce((a, b) => a + b, 0);
      const size = stored.filter((x) => x > 0).length;
      expect(size).toBe(75);
      const B = 16;
      const idx = new BigInt64Array(B);
      const w = new Float32Array(B);
      for (const beta of [0.4, 0.75, 1]) {
        expect(l.fh_per_sample(p, B, 17, beta, idx, w)).toBe(FhStatus.OK);
        const raw = Array.from(idx, (i) => Math.pow(size * ((stored[Number(i)] as number) / sum), -beta));
        const max = Math.max(...raw);
        for (let j = 0; j < B; j++) {
          expect(stored[Number(idx[j])]).toBeGreaterThan(0);
          expect(w[j]).toBeCloseTo(Math.fround((raw[j] as number) / max), 6);
        }
        expect(Math.max(...w)).toBe(1);
      }
    });
  });

  test('priority updates: new values replace old ones, duplicates take the max, zero leaves are never drawn', () => {
    withPer(8, 1, 2, (l, p) => {
      setAll(l, p, Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]));
      expect(total(l, p)).toBe(36);
      // index 3 appears three times: the max (9) wins regardless of order; index 0 -> 0
      expect(l.fh_per_set(p, 4, BigInt64Array.from([3n, 3n, 0n, 3n]), Float32Array.from([2, 9, 0, 1]))).toBe(FhStatus.OK);
      expect(total(l, p)).toBe(36 - 1 - 4 + 9);
      const idx = new BigInt64Array(64);
      const w = new Float32Array(64);
      for (let d = 0; d < 20; d++) {
        expect(l.fh_per_sample(p, 64, d, 1, idx, w)).toBe(FhStatus.OK);
        for (const i of idx) expect(i).not.toBe(0n);
      }
    });
  });

  test('sums never drift: 20k random updates then all zero gives exactly 0', () => {
    const C = 1000;
    withPer(C, 0.6, 1, (l, p) => {
      const r = rng(8);
      const idx = new BigInt64Array(50);
      const pri = new Float32Array(50);
      for (let k = 0; k < 400; k++) {
        for (let j = 0; j < 50; j++) {
          idx[j] = BigInt(Math.floor(r() * C));
          pri[j] = r() * 1000;
        }
        expect(l.fh_per_set(p, 50, idx, pri)).toBe(FhStatus.OK);
      }
      expect(total(l, p)).toBeGreaterThan(0);
      setAll(l, p, new Float32Array(C));
      expect(total(l, p)).toBe(0);
      // and an empty tree refuses to sample instead of returning garbage
      expect(l.fh_per_sample(p, 4, 0, 1, new BigInt64Array(4), new Float32Array(4))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    });
  });

  test('bad arguments return a status', () => {
    const l = lib();
    const out: [PerHandle | null] = [null];
    expect(l.fh_per_create(0, 0.6, 1, out)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    expect(l.fh_per_create(2n ** 40n, 0.6, 1, out)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    withPer(4, 0.6, 1, (l2, p) => {
      expect(l2.fh_per_set(p, 1, BigInt64Array.from([4n]), Float32Array.from([1]))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l2.fh_per_set(p, 1, BigInt64Array.from([0n]), Float32Array.from([NaN]))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l2.fh_per_set(p, 1, BigInt64Array.from([0n]), Float32Array.from([-1]))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    });
  });
});
