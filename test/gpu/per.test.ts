/**
 * Prioritised replay of the CUDA library (fh_per_*: the device sum tree the trainer uses) at full
 * capacity 2^21: sampling frequencies proportional to p^alpha by a chi-square test, zero leaves
 * never drawn, importance weights (size P(i))^-beta / batch max, the sum re-computed (no drift) after
 * many updates, the same draw giving the same batch, and the train step's priority update with its
 * partial rebuild (only the dirty l1 nodes from their leaves) giving bit for bit the tree of the full
 * rebuild (FH_PER_FULL_REBUILD=1 in the trainer).
 */
import koffi from 'koffi';
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { NativeLib, PerHandle } from '../../src/native/binding.js';
import { firstMismatch, rng } from '../native/helpers.js';

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

/**
 * fh_per_update / fh_per_read (native/src/cuda/test_entry.cu) are CUDA-only test entry points outside
 * foxhunt.h, so the binding (which must match the CPU library too) does not declare them: they are
 * declared here on the already loaded library file (same handle; fh_status and fh_per are the
 * binding's koffi types, declared by loadNative).
 */
interface TreeFns {
  update(p: PerHandle, n: number, slot: Int32Array, signal: Float32Array, eps: number, full: number): number;
  read(
    p: PerHandle, nLeaves: number, leaf: Float32Array, l1: Float64Array, cnt1: Uint8Array, l2: Float64Array, cnt2: Int32Array,
    l3: Float64Array, cnt3: BigInt64Array, total: Float64Array, count: BigInt64Array, maxPriority: Float32Array, pending: BigInt64Array,
  ): number;
}

function treeFns(l: NativeLib): TreeFns {
  const h = koffi.load(l.path);
  return {
    update: h.func('fh_status fh_per_update(fh_per *p, int32_t n, const int32_t *slot, const float *signal, float eps, int32_t full)'),
    read: h.func('fh_status fh_per_read(fh_per *p, int64_t n_leaves, float *leaf, double *l1, uint8_t *cnt1, double *l2, '
      + 'int32_t *cnt2, double *l3, int64_t *cnt3, double *total, int64_t *count, float *max_priority, int64_t *pending)'),
  };
}

/** Every level of a device tree (capacity C = padded), the max priority and the pending scratch count. */
interface Tree {
  leaf: Float32Array; l1: Float64Array; cnt1: Uint8Array; l2: Float64Array; cnt2: Int32Array; l3: Float64Array;
  cnt3: BigInt64Array; total: Float64Array; count: BigInt64Array; maxPriority: Float32Array;
}

const TREE_KEYS: readonly (keyof Tree)[] = ['leaf', 'l1', 'cnt1', 'l2', 'cnt2', 'l3', 'cnt3', 'total', 'count', 'maxPriority'];

function readTree(f: TreeFns, p: PerHandle): Tree & { pending: bigint } {
  const t: Tree = {
    leaf: new Float32Array(C), l1: new Float64Array(C / 32), cnt1: new Uint8Array(C / 32), l2: new Float64Array(C / 1024),
    cnt2: new Int32Array(C / 1024), l3: new Float64Array(C / 32768), cnt3: new BigInt64Array(C / 32768),
    total: new Float64Array(1), count: new BigInt64Array(1), maxPriority: new Float32Array(1),
  };
  const pending = new BigInt64Array(1);
  expect(f.read(p, C, t.leaf, t.l1, t.cnt1, t.l2, t.cnt2, t.l3, t.cnt3, t.total, t.count, t.maxPriority, pending)).toBe(FhStatus.OK);
  return { ...t, pending: pending[0] as bigint };
}

/** Stored priority of a train-step signal, as leaves_max_kernel: NaN/Inf/negative count as 0. */
const updated = (sig: number, eps: number): number =>
  Math.fround(Math.pow((sig >= 0 && sig !== Infinity ? sig : 0) + Math.fround(eps), Math.fround(ALPHA)));

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

  test('priority updates: the partial rebuild gives the full rebuild\'s tree bit for bit (duplicates, zero signals)', () => {
    withPer((l, p) => withPer((_, q) => {
      // p: the train step's partial rebuild; q: the same updates with the full rebuild
      const f = treeFns(l);
      const r = rng(77);
      const idx = BigInt64Array.from({ length: C }, (_, i) => BigInt(i));
      const pri = Float32Array.from({ length: C }, (_, i) => (i % 5 === 2 ? 0 : 0.01 + 3 * r()));
      expect(l.fh_per_set(p, C, idx, pri)).toBe(FhStatus.OK);
      expect(l.fh_per_set(q, C, idx, pri)).toBe(FhStatus.OK);
      let maxPriority = 1;
      const same = (what: string): Tree => {
        const a = readTree(f, p);
        const b = readTree(f, q);
        for (const k of TREE_KEYS) expect(firstMismatch(a[k], b[k]), `${what}: ${k}`).toBeNull();
        expect(a.pending, `${what}: dirty l1 flags / rebuild ticket left (partial)`).toBe(0n);
        expect(b.pending, `${what}: dirty l1 flags / rebuild ticket left (full)`).toBe(0n);
        let n = 0;
        let sum = 0;
        for (const v of a.leaf) {
          if (v > 0) n++;
          sum += v;
        }
        expect(Number(a.count[0]), `${what}: count`).toBe(n);
        expect(Math.abs((a.total[0] as number) - sum) / sum, `${what}: total`).toBeLessThan(1e-9);
        return a;
      };
      same('after fh_per_set');
      const B = 16384;
      expect(f.update(p, 1, Int32Array.of(C), Float32Array.of(1), 0, 0)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      for (let round = 0; round < 12; round++) {
        if (round === 6) {
          // leaves set between updates (a full rebuild, as collection's): the partial path reads its cnt1
          const m = 20_000;
          const ks = [...new Set(Array.from({ length: m }, () => Math.floor(r() * C)))];
          const ki = BigInt64Array.from(ks, (k) => BigInt(k));
          const kv = Float32Array.from(ks, () => (r() < 0.2 ? 0 : 0.01 + 5 * r()));
          expect(l.fh_per_set(p, ks.length, ki, kv)).toBe(FhStatus.OK);
          expect(l.fh_per_set(q, ks.length, ki, kv)).toBe(FhStatus.OK);
          same('after the mid-way fh_per_set');
        }
        const slot = new Int32Array(B);
        if (round === 3) {
          // every slot under one l2 node (1024 leaves): 16 updates per leaf on average
          const base = Math.floor(r() * (C / 1024)) * 1024;
          for (let j = 0; j < B; j++) slot[j] = base + Math.floor(r() * 1024);
        } else {
          // uniform slots, with: pairs (the first eighth again at the end), one slot 64 times, 512
          // consecutive slots across an l2 boundary (whole l1 nodes), the first and the last leaf
          for (let j = 0; j < B; j++) slot[j] = Math.floor(r() * C);
          for (let j = 0; j < B / 8; j++) slot[B - 1 - j] = slot[j] as number;
          const hot = Math.floor(r() * C);
          for (let j = B / 8; j < B / 8 + 64; j++) slot[j] = hot;
          const run = Math.floor(r() * (C / 1024 - 1)) * 1024 + 512;
          for (let j = 0; j < 512; j++) slot[B / 4 + j] = run + j;
          slot[B / 2] = 0;
          slot[B / 2 + 1] = C - 1;
        }
        const signal = Float32Array.from({ length: B }, () => {
          const u = r();
          if (u < 0.15) return 0;
          if (u < 0.16) return [Number.NaN, -1, Infinity][Math.floor(r() * 3)] as number;
          return 1e-3 + 10 * r() * r();
        });
        if (round === 8) signal[7] = 1e4; // a new max priority
        const eps = round % 2 === 0 ? 0 : 1e-3; // eps 0: a zero signal empties its leaf (count drops)
        expect(f.update(p, B, slot, signal, eps, 0)).toBe(FhStatus.OK);
        expect(f.update(q, B, slot, signal, eps, 1)).toBe(FhStatus.OK);
        const a = same(`update ${round}`);
        // the leaves themselves: zeroed, then the max over a slot's duplicates
        const want = new Map<number, number>();
        for (let j = 0; j < B; j++) {
          const k = slot[j] as number;
          const v = updated(signal[j] as number, eps);
          want.set(k, Math.max(want.get(k) ?? 0, v));
          maxPriority = Math.max(maxPriority, v);
        }
        let bad: string | null = null;
        for (const [k, v] of want) {
          const got = a.leaf[k] as number;
          if (v === 0 ? got !== 0 : !(Math.abs(got - v) <= 1e-6 * v)) {
            bad = `leaf ${k}: ${got}, expected ${v}`;
            break;
          }
        }
        expect(bad, `update ${round}`).toBeNull();
        expect(Math.abs((a.maxPriority[0] as number) - maxPriority)).toBeLessThanOrEqual(1e-6 * maxPriority);
      }
      // identical trees sample identical batches
      const n = 4096;
      const ia = new BigInt64Array(n);
      const ib = new BigInt64Array(n);
      const wa = new Float32Array(n);
      const wb = new Float32Array(n);
      expect(l.fh_per_sample(p, n, 9, 0.4, ia, wa)).toBe(FhStatus.OK);
      expect(l.fh_per_sample(q, n, 9, 0.4, ib, wb)).toBe(FhStatus.OK);
      expect(firstMismatch(ia, ib)).toBeNull();
      expect(firstMismatch(wa, wb)).toBeNull();
    }));
  });
});
