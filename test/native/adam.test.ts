/**
 * fh_adam_step (the element update the trainer runs, kernels/adam.cuh) against a float32 reference
 * written here with Math.fround after every operation: bit-identical over several steps.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import { firstMismatch, lib, rng } from './helpers.js';

const f = Math.fround;

function adamRef(p: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, lr: number, b1: number, b2: number,
  eps: number, step: number): void {
  const B1 = f(b1);
  const B2 = f(b2);
  const bc1 = f(1 - Math.pow(B1, step));
  const bc2 = f(1 - Math.pow(B2, step));
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] as number;
    m[i] = f(f(B1 * (m[i] as number)) + f(f(1 - B1) * gi));
    v[i] = f(f(B2 * (v[i] as number)) + f(f(f(1 - B2) * gi) * gi));
    const mhat = f((m[i] as number) / bc1);
    const vhat = f((v[i] as number) / bc2);
    p[i] = f((p[i] as number) - f(f(f(lr) * mhat) / f(f(Math.sqrt(vhat)) + f(eps))));
  }
}

describe('native Adam', () => {
  test('matches the float32 reference bit for bit over 25 steps', () => {
    const n = 1000;
    const r = rng(17);
    const p = Float32Array.from({ length: n }, () => (r() - 0.5) * 2);
    const m = new Float32Array(n);
    const v = new Float32Array(n);
    const pr = Float32Array.from(p);
    const p0 = Float32Array.from(p);
    const mr = new Float32Array(n);
    const vr = new Float32Array(n);
    for (let step = 1; step <= 25; step++) {
      const g = Float32Array.from({ length: n }, (_, i) => (i % 97 === 0 ? 0 : (r() - 0.5) * 10 ** (Math.floor(r() * 6) - 3)));
      expect(lib().fh_adam_step(n, p, g, m, v, 1e-3, 0.9, 0.999, 1.5e-4, step)).toBe(FhStatus.OK);
      adamRef(pr, g, mr, vr, 1e-3, 0.9, 0.999, 1.5e-4, step);
      expect(firstMismatch(m, mr), `m, step ${step}`).toBeNull();
      expect(firstMismatch(v, vr), `v, step ${step}`).toBeNull();
      expect(firstMismatch(p, pr), `p, step ${step}`).toBeNull();
    }
    // and it moved: every parameter with a non-zero gradient changed
    let moved = 0;
    for (let i = 0; i < n; i++) if (p[i] !== p0[i]) moved++;
    expect(moved).toBeGreaterThan(n * 0.95);
  });

  test('rejects a zero step and bad betas', () => {
    const a = new Float32Array(2);
    expect(lib().fh_adam_step(2, a, a, a, a, 1e-3, 0.9, 0.999, 1e-8, 0)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    expect(lib().fh_adam_step(2, a, a, a, a, 1e-3, 1.0, 0.999, 1e-8, 1)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
  });
});
