/**
 * Prioritised replay of the CUDA library (fh_per_*: the device sum tree the trainer uses) at full
 * capacity 2^21: sampling frequencies proportional to p^alpha by a chi-square test, zero leaves
 * never drawn, importance weights (size P(i))^-beta / batch max, the sum re-computed (no drift) after
 * many updates, and the same draw giving the same batch.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { NativeLib, PerHandle } from '../../src/native/binding.js';
import { rng } from '../native/helpers.js';

const C = 1 << 21;
const ALPHA = 0.6;

function withPer<T>(fn: (l: NativeLib, p: PerHandle) => T): T {
  const l = loadNative('cuda');
  const out: [PerHandle | null] = [null];
  expect(l.fh_per_create(C, ALPHA, 11, out)).toBe(FhStatus.OK);
  const p = out[0] as PerHandle;
  try {
    return fn(l, p);
  } finally {
    l.fh_per_destroy(p);
  }
}

function total(l: NativeLib, p: PerHandle): number {
  const out: [number] = [0];
  expect(l.fh_per_total(p, out)).toBe(FhStatus.OK);
  return out[0];
}

/** Stored leaf value as the library computes it: (float) pow((double) p, (double) alpha). */
const stored = (x: number): number => (x > 0 ? Math.fround(Math.pow(x, Math.fround(ALPHA))) : 0);

describe('CUDA PER at capacity 2^21', () => {
  test('chi-square of 4M stratified samples over 1024 bins; zero leaves never drawn; weights', () => {
    withPer((l, p) => {
      const r = rng(21);
      const pri = Float32Array.from({ length: C }, (_, i) => (i % 7 === 3 ? 0 : 0.01 + 4 * r() * r()));
      const idx = BigInt64Array.from({ length: C }, (_, i) => BigInt(i));
      expect(l.fh_per_set(p, C, idx, pri)).toBe(FhStatus.OK);
      const leaf = Array.from(pri, stored);
      const sum = leaf.reduce((a, b) => a + b, 0);
      expect(Math.abs(total(l, p) - sum) / sum).toBeLessThan(1e-9);
      const size = leaf.filter((x) => x > 0).length;
      const bins = 1024;
      const per = C / bins;
      const expect_ = new Array<number>(bins).fill(0);
      for (let i = 0; i < C; i++) expect_[Math.floor(i / per)] = (expect_[Math.floor(i / per)] as number) + (leaf[i] as number) / sum;
      const counts = new Array<number>(bins).fill(0);
      const B = 16384;
      const draws = 256;
      const out = new BigInt64Array(B);
      const w = new Float32Array(B);
      const beta = 0.5;
      for (let dr = 0; dr < draws; dr++) {
        expect(l.fh_per_sample(p, B, dr, beta, out, w)).toBe(FhStatus.OK);
        let minLeaf = Infinity;
        for (let j = 0; j < B; j++) {
          const k = Number(out[j]);
          const v = leaf[k] as number;
          if (!(v > 0)) throw new Error(`draw ${dr}: sampled leaf ${k} with priority 0`);
          minLeaf = Math.min(minLeaf, v);
          counts[Math.floor(k / per)] = (counts[Math.floor(k / per)] as number) + 1;
        }
        if (dr % 32 === 0) {
          for (let j = 0; j < B; j += 97) {
            const v = leaf[Number(out[j])] as number;
            const ref = Math.pow(size * (v / sum), -beta) / Math.pow(size * (minLeaf / sum), -beta);
            expect(Math.abs((w[j] as number) - ref)).toBeLessThan(1e-5 * ref + 1e-7);
          }
        }
      }
      const n = B * draws;
      let chi = 0;
      for (let k = 0; k < bins; k++) chi += ((counts[k] as number) - (expect_[k] as number) * n) ** 2 / ((expect_[k] as number) * n);
      // df = 1023 (mean 1023, sd 45); stratification only lowers it. A sampler off by 1% in one bin
      // of 4096 expected draws already adds ~0.2 per bin; a wrong descent adds thousands.
      expect(chi).toBeLessThan(1023 + 6 * 45);
    });
  });

  test('the same draw gives the same batch; updates keep the sum exact (no drift)', () => {
    withPer((l, p) => {
      const r = rng(5);
      const idx = BigInt64Array.from({ length: C }, (_, i) => BigInt(i));
      const pri = Float32Array.from({ length: C }, () => 0.1 + r());
      expect(l.fh_per_set(p, C, idx, pri)).toBe(FhStatus.OK);
      const leaf = Array.from(pri, stored);
      const B = 4096;
      const a = new BigInt64Array(B);
      const b = new BigInt64Array(B);
      const w = new Float32Array(B);
      expect(l.fh_per_sample(p, B, 42, 0.4, a, w)).toBe(FhStatus.OK);
      expect(l.fh_per_sample(p, B, 42, 0.4, b, w)).toBe(FhStatus.OK);
      expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
      expect(l.fh_per_sample(p, B, 43, 0.4, b, w)).toBe(FhStatus.OK);
      expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(false);
      // 200 rounds of random updates (some to 0): the device total tracks the exact host sum
      const m = 50_000;
      const ui = new BigInt64Array(m);
      const up = new Float32Array(m);
      for (let round = 0; round < 200; round++) {
        for (let j = 0; j < m; j++) {
          const k = Math.floor(r() * C);
          ui[j] = BigInt(k);
          up[j] = r() < 0.1 ? 0 : 1e-3 + 10 * r();
        }
        // distinct indices per call (duplicates are the trainer's max-rule, not fh_per_set's)
        const seen = new Map<number, number>();
        for (let j = 0; j < m; j++) seen.set(Number(ui[j]), up[j] as number);
        const keys = [...seen.keys()];
        const ki = BigInt64Array.from(keys, (k) => BigInt(k));
        const kv = Float32Array.from(keys, (k) => seen.get(k) as number);
        expect(l.fh_per_set(p, keys.length, ki, kv)).toBe(FhStatus.OK);
        for (let j = 0; j < keys.length; j++) leaf[keys[j] as number] = stored(kv[j] as number);
      }
      let sum = 0;
      for (const v of leaf) sum += v;
      expect(Math.abs(total(l, p) - sum) / sum).toBeLessThan(1e-9);
    });
  });
});
