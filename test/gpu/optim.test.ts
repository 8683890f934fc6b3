/**
 * The fused optimiser step (fh_launch_optimise_fused, kernels/gradnorm.cu: the squares partials and one
 * kernel, or its one launch whose blocks compute the partials and meet at a grid barrier, each run by every case)
 * against the 5-launch chain fh_net_optimise runs (partials, norm and clip factor, Adam, step
 * bump, target update), through the CUDA library's test entry fh_cuda_optimise_check
 * (native/src/cuda/test_entry.cu). Same random state and gradients, several steps, T = float without
 * shadows (the fp32 trainer), float with shadows and bf16 shadows, eagerly and as one captured step
 * replayed: p, m, v, target, both shadows, the step counter and every step's norm and clip factor
 * agree bit for bit. The cases cover hard target copies (t % every == 0, the t Adam used), Polyak tau,
 * clipping on and off, the reference size (~867k, n % 4 != 0: the scalar tail), a grid-stride size,
 * a 3-element vector, and NaN / Inf gradients (non-finite norm, clip factor 0).
 * Inputs are fresh random draws (seeded from the clock, printed on failure).
 *
 * fh_cuda_optimise_check is a CUDA-only test entry outside foxhunt.h (like fh_cuda_eval_check), so this
 * file binds it itself.
 */
import koffi from 'koffi';
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import { firstMismatch, rng } from '../native/helpers.js';

const SEED = Date.now() % 1_000_000;
const LR = 1e-3;
const BETA1 = 0.9;
const BETA2 = 0.999;
const EPS = 1.5e-4;

type Elem = 'f32' | 'f32 shadows' | 'bf16';

interface Case {
  name: string;
  n: number;
  step0: number;
  clip: number;
  every: number;
  tau: number;
  /** per step: gradient scale (the norm is about scale * sqrt(n)) */
  gscale: number[];
  /** per step: the clip factor must be < 1 (true) or exactly 1 (false); null: not finite (NaN / Inf step) */
  clipped: (boolean | null)[];
  /** non-finite gradient entries: [step, index, value] */
  bad?: [number, number, number][];
}

const cases: Case[] = [
  // t = 1..6 with every 3: hard copies after steps 3 and 6; clip 0.5 sqrt(n) bites at scale >= 1
  { name: 'reference size, hard target copies, clipping on and off', n: 867_331, step0: 0, clip: 0.5 * Math.sqrt(867_331),
    every: 3, tau: 0, gscale: [0.1, 1, 0.1, 3, 0.2, 0.05], clipped: [false, true, false, true, false, false] },
  { name: 'Polyak tau, clipping off, late step', n: 5_003, step0: 12_345, clip: 0, every: 3, tau: 0.005,
    gscale: [1, 5, 0.5, 2], clipped: [false, false, false, false] },
  // t = 8..10, no copy; > 1056 blocks * 256 threads * 4 elements: the grid-stride loop
  { name: 'grid-stride size, no target update', n: 3_000_001, step0: 7, clip: 0.5 * Math.sqrt(3_000_001), every: 1000,
    tau: 0, gscale: [1, 0.1, 1], clipped: [true, false, true] },
  { name: 'three elements (tail only, one block), hard copy every step', n: 3, step0: 0, clip: 0.5, every: 1, tau: 0,
    gscale: [10, 0.01, 10], clipped: [true, false, true] },
  // t = 3..6 with every 2: copies after 4 and 6, so the NaN reaches the target too
  { name: 'NaN and Inf gradients', n: 10_007, step0: 2, clip: 0.5 * Math.sqrt(10_007), every: 2, tau: 0,
    gscale: [1, 1, 1, 0.1], clipped: [true, null, null, false],
    bad: [[1, 17, NaN], [2, 10_006, Infinity], [2, 4000, -Infinity]] },
];

interface State { p: Float32Array; m: Float32Array; v: Float32Array; tgt: Float32Array }
interface Out extends State {
  step: bigint;
  shadow: Uint8Array | null;
  tgtShadow: Uint8Array | null;
  norm: Float32Array;
  scale: Float32Array;
}

let checkFn: ReturnType<ReturnType<typeof koffi.load>['func']> | null = null;
function optimiseCheck(): NonNullable<typeof checkFn> {
  if (checkFn === null) {
    // the library file loadNative opened (a clear error when it is missing or stale), as per.test.ts does
    checkFn = koffi.load(loadNative('cuda').path).func(
      'int32_t fh_cuda_optimise_check(int32_t fused, int32_t bf16, int32_t graph, int64_t n, int32_t steps, '
      + 'const float *grads, float *p, float *m, float *v, float *tgt, int64_t *step, float clip, float lr, '
      + 'float beta1, float beta2, float eps, int32_t target_every, float tau, void *shadow, void *tgt_shadow, '
      + 'float *norm, float *scale)');
  }
  return checkFn;
}

function inputs(c: Case, seed: number): { init: State; grads: Float32Array } {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const p = Float32Array.from({ length: c.n }, () => 0.05 * gauss());
  const init: State = {
    p,
    m: Float32Array.from({ length: c.n }, () => 1e-3 * gauss()),
    v: Float32Array.from({ length: c.n }, () => 1e-6 * Math.abs(gauss())),
    tgt: p.map((x) => x * (1 + 0.1 * gauss())),
  };
  const steps = c.gscale.length;
  const grads = new Float32Array(steps * c.n);
  for (let k = 0; k < steps; k++) {
    const s = c.gscale[k] ?? 1;
    for (let i = 0; i < c.n; i++) grads[k * c.n + i] = s * gauss();
  }
  for (const [k, i, x] of c.bad ?? []) grads[k * c.n + i] = x;
  return { init, grads };
}

/** 0: the 5-launch chain; 1: the fused step's two launches; 2: its one launch (a grid barrier inside). */
type Mode = 0 | 1 | 2;
const MODE_NAME = ['chain', 'fused (2 launches)', 'fused (1 launch)'] as const;

function run(c: Case, init: State, grads: Float32Array, elem: Elem, mode: Mode, graph: boolean): Out {
  const steps = c.gscale.length;
  const bytes = c.n * (elem === 'bf16' ? 2 : 4);
  const out: Out = {
    p: init.p.slice(), m: init.m.slice(), v: init.v.slice(), tgt: init.tgt.slice(), step: 0n,
    shadow: elem === 'f32' ? null : new Uint8Array(bytes), tgtShadow: elem === 'f32' ? null : new Uint8Array(bytes),
    norm: new Float32Array(steps).fill(-1), scale: new Float32Array(steps).fill(-1),
  };
  const step = BigInt64Array.of(BigInt(c.step0));
  const st = optimiseCheck()(mode, elem === 'bf16' ? 1 : 0, graph ? 1 : 0, c.n, steps, grads, out.p, out.m, out.v,
    out.tgt, step, c.clip, LR, BETA1, BETA2, EPS, c.every, c.tau, out.shadow, out.tgtShadow, out.norm, out.scale) as number;
  expect(st, `fh_cuda_optimise_check (${MODE_NAME[mode]}, ${elem}, graph ${graph})`).toBe(FhStatus.OK);
  out.step = step[0] ?? -1n;
  return out;
}

function expectSame(a: Out, b: Out, what: string): void {
  for (const k of ['p', 'm', 'v', 'tgt', 'norm', 'scale'] as const) {
    expect(firstMismatch(a[k], b[k]), `${what}: ${k} (seed ${SEED})`).toBeNull();
  }
  for (const k of ['shadow', 'tgtShadow'] as const) {
    const x = a[k];
    const y = b[k];
    expect(x === null, `${what}: ${k} present`).toBe(y === null);
    if (x !== null && y !== null) expect(firstMismatch(x, y), `${what}: ${k} (seed ${SEED})`).toBeNull();
  }
  expect(a.step, `${what}: step`).toBe(b.step);
}

/** The chain's results exercise what the case is about (so equal bits mean something). */
function expectCase(c: Case, ref: Out): void {
  const steps = c.gscale.length;
  expect(ref.step).toBe(BigInt(c.step0 + steps));
  for (let k = 0; k < steps; k++) {
    const norm = ref.norm[k] ?? NaN;
    const scale = ref.scale[k] ?? NaN;
    const want = c.clipped[k];
    if (want === null) {
      expect(Number.isFinite(norm), `step ${k}: norm ${norm}`).toBe(false);
      expect(scale, `step ${k}: clip factor of a non-finite norm`).toBe(0);
    } else {
      expect(Number.isFinite(norm) && norm > 0, `step ${k}: norm ${norm}`).toBe(true);
      if (want) expect(scale, `step ${k}: clipped (norm ${norm}, clip ${c.clip})`).toBeLessThan(1);
      else expect(scale, `step ${k}: not clipped (norm ${norm}, clip ${c.clip})`).toBe(1);
    }
  }
  const last = c.step0 + steps;
  const copied = c.tau <= 0 && last % c.every === 0;
  const same = Buffer.from(ref.tgt.buffer).equals(Buffer.from(ref.p.buffer));
  if (c.tau > 0 || copied) {
    expect(same, 'target == online after the last step').toBe(copied);
    if (copied && ref.shadow !== null && ref.tgtShadow !== null) {
      expect(firstMismatch(ref.tgtShadow, ref.shadow), 'target shadow == online shadow').toBeNull();
    }
  } else {
    expect(same, 'no target update in the last step').toBe(false);
  }
  if (c.bad !== undefined) {
    const [k0, i0] = c.bad[0] ?? [0, 0];
    expect(Number.isNaN(ref.p[i0]), `p[${i0}] after the NaN gradient of step ${k0} (as the chain does)`).toBe(true);
  }
}

describe('fused optimiser step == the 5-launch chain, bit for bit', () => {
  cases.forEach((c, ci) => {
    for (const elem of ['f32', 'f32 shadows', 'bf16'] as const) {
      test(`${c.name}: ${elem}`, () => {
        const { init, grads } = inputs(c, SEED + 31 * ci);
        const ref = run(c, init, grads, elem, 0, false);
        expectCase(c, ref);
        for (const mode of [1, 2] as const) {
          expectSame(run(c, init, grads, elem, mode, false), ref, `${MODE_NAME[mode]} vs chain`);
          expectSame(run(c, init, grads, elem, mode, true), ref, `${MODE_NAME[mode]} (graph replays) vs chain`);
        }
        expectSame(run(c, init, grads, elem, 0, true), ref, 'chain (graph replays) vs chain');
      });
    }
  });
});
