/**
 * Samplers of a sweep's search space: grid, seeded pseudo-random and seeded quasi-random (Halton
 * with a Cranley-Patterson rotation). Every sampler maps trial i to one point of the unit cube, and
 * each dimension maps its coordinate onto its domain, so all samplers share one decoding step.
 * Deterministic: the same space, sampler and seed give the same trials in the same order.
 */
import type { Dimension, SamplerSpec } from './spec.js';

export type ParamValue = number | string | boolean;
export type Params = Record<string, ParamValue>;

/** mulberry32: a small, seeded 32-bit PRNG; good enough to place trials, never used for training. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97];

/** Radical inverse of `index` in base `base`: the Halton coordinate. */
export function radicalInverse(index: number, base: number): number {
  let result = 0;
  let f = 1 / base;
  let i = index;
  while (i > 0) {
    result += f * (i % base);
    i = Math.floor(i / base);
    f /= base;
  }
  return result;
}

/** Maps a unit coordinate u in [0, 1) onto a dimension's domain. */
export function decode(dim: Dimension, u: number): ParamValue {
  const x = Math.min(Math.max(u, 0), 1 - Number.EPSILON);
  switch (dim.kind) {
    case 'choice':
    case 'grid':
      return pick(dim.values, Math.floor(x * dim.values.length));
    case 'uniform':
      return dim.low + x * (dim.high - dim.low);
    case 'log_uniform':
      return Math.exp(Math.log(dim.low) + x * (Math.log(dim.high) - Math.log(dim.low)));
    case 'int':
      return dim.low + Math.floor(x * (dim.high - dim.low + 1));
  }
}

/** The finite values a dimension takes on a grid (continuous ones need `points`). */
export function gridValues(dim: Dimension): ParamValue[] {
  switch (dim.kind) {
    case 'choice':
    case 'grid':
      return [...dim.values];
    case 'int': {
      const n = dim.points ?? dim.high - dim.low + 1;
      if (n >= dim.high - dim.low + 1) {
        return Array.from({ length: dim.high - dim.low + 1 }, (_, i) => dim.low + i);
      }
      return unique(Array.from({ length: n }, (_, i) => Math.round(dim.low + (i * (dim.high - dim.low)) / Math.max(1, n - 1))));
    }
    case 'uniform':
    case 'log_uniform': {
      const n = dim.points ?? 0;
      if (n < 1) throw new Error(`${dim.kind} needs points on a grid`);
      if (n === 1) return [decode(dim, 0.5)];
      return Array.from({ length: n }, (_, i) => dim.kind === 'uniform'
        ? dim.low + (i * (dim.high - dim.low)) / (n - 1)
        : Math.exp(Math.log(dim.low) + (i * (Math.log(dim.high) - Math.log(dim.low))) / (n - 1)));
    }
  }
}

/** Size of the full grid of a space. */
export function gridSize(space: Record<string, Dimension>): number {
  return Object.values(space).reduce((n, d) => n * gridValues(d).length, 1);
}

/**
 * An endless, deterministic stream of candidate parameter sets. Grid yields the cartesian product
 * in row-major order (last key fastest) and then stops.
 */
export function* sampleSpace(space: Record<string, Dimension>, sampler: SamplerSpec): Generator<Params> {
  const keys = Object.keys(space).sort();
  const dims = keys.map((k) => space[k] as Dimension);
  if (sampler.kind === 'grid') {
    const axes = dims.map(gridValues);
    const total = axes.reduce((n, a) => n * a.length, 1);
    for (let i = 0; i < total; i++) {
      const params: Params = {};
      let rest = i;
      for (let d = axes.length - 1; d >= 0; d--) {
        const axis = axes[d] as ParamValue[];
        params[keys[d] as string] = pick(axis, rest % axis.length);
        rest = Math.floor(rest / axis.length);
      }
      yield params;
    }
    return;
  }
  const rng = mulberry32(sampler.seed);
  // Halton: one prime base per dimension, each rotated by a seeded shift (Cranley-Patterson), and
  // index 0 (the origin) skipped. A `grid` dimension cycles through its values in both samplers.
  const shifts = dims.map(() => rng());
  if (dims.length > PRIMES.length) throw new Error(`halton supports at most ${PRIMES.length} dimensions`);
  for (let i = 0; ; i++) {
    const params: Params = {};
    dims.forEach((dim, d) => {
      const key = keys[d] as string;
      if (dim.kind === 'grid') {
        params[key] = pick(dim.values, i % dim.values.length);
        return;
      }
      const u = sampler.kind === 'random' ? rng() : (radicalInverse(i + 1, PRIMES[d] as number) + (shifts[d] as number)) % 1;
      params[key] = decode(dim, u);
    });
    yield params;
  }
}

function pick<T>(values: readonly T[], i: number): T {
  const v = values[i];
  if (v === undefined) throw new Error(`index ${i} outside ${values.length} values`);
  return v;
}

function unique<T>(xs: T[]): T[] {
  return [...new Set(xs)];
}
