/**
 * The CUDA backend's network and orchestration (npm run test:gpu, on a GPU host):
 *   - forward (fh_trainer_q_values) and loss + gradient (fh_trainer_loss_grad) against the CPU backend
 *     on identical parameters: tight in the deterministic fp32 mode, within bf16 tolerance otherwise,
 *     for C51 (atoms 51) and plain Q (atoms 1, Huber). bf16 gradients get 12% relative L2: every layer
 *     rounds activations and incoming gradients to 8 mantissa bits and the Huber gradient is a sum of
 *     terms of both signs (measured on an H200: 1.8% for C51, 8.7% for Huber; fp32 mode: 2e-7);
 *   - the fast C51 loss against the general one, the fused-epilogue backward against the kernel one,
 *     bf16 against fp32 head outputs of the training passes, the reference GEMM against cuBLASLt;
 *   - graphs on == graphs off, bit for bit (epoch scalars and parameters), and step groups (several train steps a
 *     graph launch, FH_STEP_GROUP) == one step a graph, bit for bit; the replay chain's reorders (the early zero,
 *     the loss mean's branch) == the old order, bit for bit;
 *   - one host synchronisation per epoch;
 *   - the edge-market learning check on the GPU (the CPU backend learns it in ~20 tiny epochs);
 *   - a checkpoint saved on the GPU resumes bit for bit.
 * Inputs are fresh random draws (seeded from the clock, printed on failure).
 */
import koffi from 'koffi';
import { describe, expect, test } from 'vitest';
import type { RunConfig } from '../../src/config/schema.js';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { FhConfig, FhEpochStats, NativeLib, TrainerHandle } from '../../src/native/binding.js';
import { create, info, market, nativeConfig, nativeMarket, params, rng, runEpoch, saveCheckpoint, tinyConfig, withEnv, withTrainer } from '../native/helpers.js';

const SEED = Date.now() % 1_000_000;

function cudaConfig(cfg: RunConfig, overrides: Partial<FhConfig> = {}): FhConfig {
  return nativeConfig(cfg, { backend: 1, use_graphs: 1, deterministic: 0, ...overrides });
}

function relL2(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? NaN;
    const y = b[i] ?? NaN;
    if (!Number.isFinite(x) || !Number.isFinite(y)) return Infinity;
    num += (x - y) ** 2;
    den += y * y;
  }
  return den > 0 ? Math.sqrt(num / den) : Math.sqrt(num);
}

/** A random batch of B transitions of obs dimension D from the draw r (a done every `doneEvery`-th). */
function randomBatch(r: () => number, B: number, D: number, doneEvery: number) {
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  return {
    obs: Float32Array.from({ length: B * D }, gauss),
    next: Float32Array.from({ length: B * D }, gauss),
    act: Int32Array.from({ length: B * 3 }, (_, i) => Math.floor(r() * (i % 3 === 1 ? 4 : 3))),
    ret: Float32Array.from({ length: B }, () => 2 * gauss()),
    disc: Float32Array.from({ length: B }, (_, i) => (i % doneEvery === 0 ? 0 : 0.970299)),
    w: Float32Array.from({ length: B }, () => 0.5 + 0.5 * r()),
  };
}

describe('CUDA network vs the CPU backend', () => {
  // hh 128: the heads' ReLU backward also runs in the GEMM epilogues (tiny's hh 16 keeps it a kernel)
  const cases = [
    { det: 1, atoms: 51, hh: 16, tolQ: 1e-4, tolG: 1e-3 },
    { det: 1, atoms: 1, hh: 16, tolQ: 1e-4, tolG: 1e-3 },
    { det: 0, atoms: 51, hh: 16, tolQ: 2e-2, tolG: 1.2e-1 },
    { det: 0, atoms: 1, hh: 16, tolQ: 2e-2, tolG: 1.2e-1 },
    { det: 1, atoms: 51, hh: 128, tolQ: 1e-4, tolG: 1e-3 },
    { det: 0, atoms: 51, hh: 128, tolQ: 2e-2, tolG: 1.2e-1 },
  ];
  for (const c of cases) {
    test(`${c.det ? 'fp32 deterministic' : 'bf16'}, atoms ${c.atoms}, head_hidden ${c.hh}: q_values, loss, gradient, priority signal`, () => {
      const cfg = tinyConfig([`agent.atoms=${c.atoms}`, `agent.head_hidden=${c.hh}`]);
      const m = nativeMarket(market(cfg));
      const cpu = loadNative('cpu');
      const gpu = loadNative('cuda');
      const hc = create(cpu, nativeConfig(cfg), m);
      const hg = create(gpu, cudaConfig(cfg, { deterministic: c.det, use_graphs: 0 }), m);
      try {
        const P = Number(info(cpu, hc).n_params);
        const D = info(cpu, hc).obs_dim;
        expect(Number(info(gpu, hg).n_params)).toBe(P);
        const r = rng(SEED + c.atoms + 7 * c.det);
        const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
        const online = new Float32Array(P);
        expect(cpu.fh_trainer_get_params(hc, 0, online, P)).toBe(FhStatus.OK);
        const target = online.map((v) => (v === 0 ? 0 : v * (1 + 0.2 * gauss())));
        for (const [l, h] of [[cpu, hc], [gpu, hg]] as const) {
          expect(l.fh_trainer_set_params(h, 0, online, P)).toBe(FhStatus.OK);
          expect(l.fh_trainer_set_params(h, 1, target, P)).toBe(FhStatus.OK);
        }
        const B = 64;
        const { obs, next, act, ret, disc, w } = randomBatch(r, B, D, 7);
        const nq = 10;
        const qc = new Float32Array(B * nq);
        const qg = new Float32Array(B * nq).fill(NaN);
        expect(cpu.fh_trainer_q_values(hc, B, obs, qc)).toBe(FhStatus.OK);
        expect(gpu.fh_trainer_q_values(hg, B, obs, qg)).toBe(FhStatus.OK);
        expect(relL2(qg, qc), `seed ${SEED}`).toBeLessThan(c.tolQ);
        const lc: [number] = [0];
        const lg: [number] = [NaN];
        const gc = new Float32Array(P);
        const gg = new Float32Array(P).fill(NaN);
        const tc = new Float32Array(B);
        const tg = new Float32Array(B).fill(NaN);
        expect(cpu.fh_trainer_loss_grad(hc, B, obs, act, ret, disc, next, w, lc, gc, tc)).toBe(FhStatus.OK);
        expect(gpu.fh_trainer_loss_grad(hg, B, obs, act, ret, disc, next, w, lg, gg, tg), gpu.fh_trainer_last_error(hg) ?? '')
          .toBe(FhStatus.OK);
        expect(Math.abs(lg[0] - lc[0]) / Math.abs(lc[0]), `seed ${SEED}`).toBeLessThan(c.tolQ);
        expect(relL2(gg, gc), `seed ${SEED}`).toBeLessThan(c.tolG);
        expect(relL2(tg, tc), `seed ${SEED}`).toBeLessThan(c.tolG);
      } finally {
        cpu.fh_trainer_destroy(hc);
        gpu.fh_trainer_destroy(hg);
      }
    });
  }
});

/** Loss + gradient of one batch on identical parameters and inputs, with env[name] = value while the
 *  trainer is created and run (the native side reads these switches then). */
function lossGradWith(cfg: RunConfig, det: number, env: Record<string, string>, seed: number, B: number) {
  const m = nativeMarket(market(cfg));
  const gpu = loadNative('cuda');
  const r = rng(seed);
  return withEnv(env, () =>
    withTrainer(gpu, cudaConfig(cfg, { deterministic: det, use_graphs: 0 }), m, (h) => {
      const inf = info(gpu, h);
      const P = Number(inf.n_params);
      const D = inf.obs_dim;
      const { obs, next, act, ret, disc, w } = randomBatch(r, B, D, 5);
      const loss: [number] = [NaN];
      const g = new Float32Array(P).fill(NaN);
      const td = new Float32Array(B).fill(NaN);
      expect(gpu.fh_trainer_loss_grad(h, B, obs, act, ret, disc, next, w, loss, g, td), gpu.fh_trainer_last_error(h) ?? '')
        .toBe(FhStatus.OK);
      return { engine: inf.engine, loss: loss[0], g, td };
    }));
}

function expectClose(a: ReturnType<typeof lossGradWith>, b: ReturnType<typeof lossGradWith>, tol: number, tolG: number): void {
  const diffs = `seed ${SEED}: loss ${a.loss} vs ${b.loss}, td ${relL2(a.td, b.td)}, grad ${relL2(a.g, b.g)}`;
  expect(Math.abs(a.loss - b.loss) / Math.abs(b.loss), diffs).toBeLessThan(tol);
  expect(relL2(a.td, b.td), diffs).toBeLessThan(tol);
  expect(relL2(a.g, b.g), diffs).toBeLessThan(tolG);
}

describe('alternative kernels of the train step agree', () => {
  // The register-only C51 loss (default for branches of <= 8 actions) against the general
  // shared-memory kernel (FH_LOSS_KERNEL=general): same math, sums in another order (in bf16 mode the
  // register kernel also runs approximate exp / log / reciprocals, FH_LOSS_FAST below).
  for (const det of [1, 0]) {
    test(`${det ? 'fp32 deterministic' : 'bf16'}: fast C51 loss == general C51 loss`, () => {
      const cfg = tinyConfig(['agent.atoms=51']);
      const a = lossGradWith(cfg, det, {}, SEED + 201 + det, 64);
      const b = lossGradWith(cfg, det, { FH_LOSS_KERNEL: 'general' }, SEED + 201 + det, 64);
      expectClose(a, b, 1e-5, det ? 1e-5 : 1e-2);
    });
  }
  // bf16 mode: the approximate-math register kernel (default) against the exact one (FH_LOSS_FAST=0,
  // the fp32 mode's kernel). A host emulation of both (4-ulp error model for ex2 / lg2 / rcp) put
  // loss and signal within 1e-6 of each other; the gradient is stored as bf16, so roundings that flip
  // one bf16 ulp dominate there (as in the test above).
  test('bf16: approximate-math C51 loss == exact C51 loss (FH_LOSS_FAST=0)', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const a = lossGradWith(cfg, 0, {}, SEED + 211, 64);
    const b = lossGradWith(cfg, 0, { FH_LOSS_FAST: '0' }, SEED + 211, 64);
    expectClose(a, b, 1e-5, 1e-2);
  });
  // bf16 mode: the half-warp C51 loss (two samples a warp, the action slots packed; the default for the reference's
  // branch sizes 3, 4, 3, which it has compiled in) against the one-warp kernel (FH_LOSS_HALF=0), with its other
  // instances: exact4 (4 blocks per SM), packed (the run-time sizes, packed slots) and generic (the run-time-size
  // instance, for any branches of <= 4 actions). B odd: a warp's second half has no sample. Other shapes (17 atoms,
  // branches 3, 2, 3 with actions past a branch, clamped) run the warp kernel by default and the generic instance.
  // This comparison caught a ptxas miscompile of the compiled-in instance (kernels/loss.cu, bench/gpu/loss_probe.cu).
  const halfCases: [string, string[], string[]][] = [
    ['atoms 51, branches 3,4,3', ['agent.atoms=51'], ['', 'exact4', 'packed', 'generic']],
    ['atoms 17, branches 3,4,3', ['agent.atoms=17'], ['', 'exact4', 'packed', 'generic']],
    ['atoms 51, branches 3,2,3', ['agent.atoms=51', 'env.branch_sizes=[3,2,3]'], ['generic']],
    ['atoms 17, branches 3,2,3', ['agent.atoms=17', 'env.branch_sizes=[3,2,3]'], ['generic']],
  ];
  for (const [name, sets, picks] of halfCases) {
    for (const pick of picks) {
      test(`bf16, ${name}: half-warp C51 loss (${pick || 'default'}) == one-warp loss (FH_LOSS_HALF=0)`, () => {
        const cfg = tinyConfig(sets);
        const a = lossGradWith(cfg, 0, pick ? { FH_LOSS_HALF: pick } : {}, SEED + 221, 63);
        const b = lossGradWith(cfg, 0, { FH_LOSS_HALF: '0' }, SEED + 221, 63);
        expect(a.g.every(Number.isFinite)).toBe(true);
        expectClose(a, b, 1e-5, 1e-2);
      });
    }
  }
  // The fp32 mode always runs the exact kernel: FH_LOSS_FAST changes no bit there.
  test('fp32 deterministic: FH_LOSS_FAST=0 changes nothing, bit for bit', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const a = lossGradWith(cfg, 1, {}, SEED + 212, 64);
    const b = lossGradWith(cfg, 1, { FH_LOSS_FAST: '0' }, SEED + 212, 64);
    expect(a.loss).toStrictEqual(b.loss);
    expect(Buffer.from(a.td.buffer).equals(Buffer.from(b.td.buffer))).toBe(true);
    expect(Buffer.from(a.g.buffer).equals(Buffer.from(b.g.buffer))).toBe(true);
  });
  // The backward through cuBLASLt's DRELU / BGRADB epilogues (FH_FUSED_EPILOGUE=1) against the
  // elementwise kernels (the default). bf16: the fp32 mode may fall back to the kernels.
  test('bf16: fused-epilogue backward == kernel backward', () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.head_hidden=128']);
    const a = lossGradWith(cfg, 0, { FH_FUSED_EPILOGUE: '1' }, SEED + 301, 64);
    const b = lossGradWith(cfg, 0, { FH_FUSED_EPILOGUE: '0' }, SEED + 301, 64);
    expect(a.engine).toMatch(/fused-epilogue backward/);
    expect(b.engine).toMatch(/kernel backward/);
    // the forward with a mask may run another cuBLASLt kernel; bias sums in another order
    expectClose(a, b, 2e-2, 6e-2);
  });
});

/** The parameter blocks of native/src/common/layout.h: [name, offset, length]. */
function layoutBlocks(D: number, h1: number, h2: number, hh: number, outs: number[]): [string, number, number][] {
  const a64 = (n: number) => Math.ceil(n / 64) * 64;
  const blocks: [string, number, number][] = [];
  let off = 0;
  const add = (name: string, n: number) => {
    blocks.push([name, off, n]);
    off = a64(off + n);
  };
  add('W1', h1 * D);
  add('b1', h1);
  add('W2', h2 * h1);
  add('b2', h2);
  add('WH', outs.length * hh * h2);
  add('bH', outs.length * hh);
  outs.forEach((o, k) => {
    const pad = Math.ceil(o / 8) * 8;
    add(`WO${k}`, pad * hh);
    add(`bO${k}`, pad);
  });
  return blocks;
}

/** Every parameter block's gradient of a (reference widths 512 / 256 / 128, head outputs `outs` columns) within
 *  relative L2 `tol` of b's, each on its own (a wrong head, bias or layer cannot hide in the total); b's blocks must
 *  be nonzero, so that an all-zero gradient cannot pass. */
function expectBlocksClose(cfg: RunConfig, a: Float32Array, b: Float32Array, outs: number[], tol: number): void {
  const gpu = loadNative('cuda');
  const D = withTrainer(gpu, cudaConfig(cfg), nativeMarket(market(cfg)), (h) => info(gpu, h).obs_dim);
  const blocks = layoutBlocks(D, 512, 256, 128, outs);
  expect(blocks.at(-1)?.[1]).toBeLessThan(a.length);
  for (const [name, off, n] of blocks) {
    const ga = a.subarray(off, off + n);
    const gb = b.subarray(off, off + n);
    let norm = 0;
    for (const v of gb) norm += v * v;
    expect(norm, `${name}: the reference side's gradient is all zero`).toBeGreaterThan(0);
    expect(relL2(ga, gb), `seed ${SEED}: gradient block ${name}`).toBeLessThan(tol);
  }
}

/** One batch's loss, priority signal and gradient at reference widths (512 / 256 / 128, atoms per `outs`) with the
 *  switches aEnv against bEnv: a's engine line matches `engine` and b's does not, a is finite, and both agree within
 *  tol (loss, signal), tolG (gradient) and tolB (each parameter block on its own). */
function expectSwitchAgrees(cfg: RunConfig, aEnv: Record<string, string>, bEnv: Record<string, string>, seed: number,
  B: number, engine: RegExp, outs: number[], [tol, tolG, tolB]: [number, number, number]): void {
  const a = lossGradWith(cfg, 0, aEnv, seed, B);
  const b = lossGradWith(cfg, 0, bEnv, seed, B);
  expect(a.engine).toMatch(engine);
  expect(b.engine).not.toMatch(engine);
  expect(a.g.every(Number.isFinite) && a.td.every(Number.isFinite)).toBe(true);
  expectClose(a, b, tol, tolG);
  expectBlocksClose(cfg, a.g, b.g, outs, tolB);
}

/** A reference-width trainer at lr 1e-12 (its weights stay) with the switches env: its engine line and one epoch's
 *  statistics. */
function frozenEpochs(cfg: RunConfig, env: Record<string, string>): { engine: string; st: FhEpochStats } {
  return withEnv(env, () => {
    const gpu = loadNative('cuda');
    return withTrainer(gpu, cudaConfig(cfg, { lr: 1e-12 }), nativeMarket(market(cfg)), (h) => {
      const engine = info(gpu, h).engine;
      return { engine, st: runEpoch(gpu, h) };
    });
  });
}

/** A head-shape case: its name, its config settings (atoms first), its branch sizes and its batch. */
type HeadCase = [string, string[], number[], number];

/** For each case, one test: a reference-width trainer (512 / 256 / 128, the case's atoms and branches) whose loss,
 *  signal and every gradient block with aEnv agree with bEnv's (expectSwitchAgrees). */
function switchCases(cases: HeadCase[], aEnv: Record<string, string>, bEnv: Record<string, string>, seed: number,
  engine: RegExp, tols: [number, number, number]): void {
  for (const [name, sets, sizes, B] of cases) {
    test(`bf16, reference widths, ${name}: loss, priority signal and every gradient block agree`, () => {
      const cfg = tinyConfig([...sets, 'agent.hidden1=512', 'agent.hidden2=256', 'agent.head_hidden=128',
        'train.batch_size=320']);
      const atoms = Number(sets[0]?.split('=')[1]);
      expectSwitchAgrees(cfg, aEnv, bEnv, seed, B, engine, [atoms, ...sizes.map((n) => n * atoms)], tols);
    });
  }
}

/** An epoch's Q statistics (within 1e-4 relative, or tolQ) and loss mean (1e-2) of run a against run b. */
function expectEpochStatsClose(a: FhEpochStats, b: FhEpochStats, tolQ = 1e-4): void {
  expect(Number(a.q_var)).toBeGreaterThan(0);
  for (const k of ['q_mean', 'q_min', 'q_max', 'q_var', 'loss_mean'] as const) {
    const x = Number(a[k]);
    const y = Number(b[k]);
    const tol = k === 'loss_mean' ? 1e-2 : tolQ;
    expect(Number.isFinite(x) && Number.isFinite(y), `${k}: ${x} vs ${y}`).toBe(true);
    expect(Math.abs(x - y), `seed ${SEED}: ${k} ${x} vs ${y}`).toBeLessThanOrEqual(tol * Math.max(1e-3, Math.abs(y)));
  }
}

describe('the grouped tensor-core GEMM (kernels/mma_gemm.cu) against cuBLASLt + elementwise kernels', () => {
  // FH_MMA=1 (bf16): the head outputs of every forward and the backward's input gradients (ReLU derivative
  // and bias sums in the epilogue) run the project's mma kernel; the default keeps cuBLASLt. Reference
  // widths (several 128 x 128 tiles, head outputs of 56..208 columns, k tails) and a batch with a
  // partial row tile; every parameter block's gradient is compared on its own, so a wrong bias sum or
  // one wrong head cannot hide in the total.
  test('bf16, reference widths, B 300: q_values, loss, priority signal and every gradient block agree', () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.hidden1=512', 'agent.hidden2=256', 'agent.head_hidden=128',
      'train.batch_size=320']);
    expectSwitchAgrees(cfg, { FH_MMA: '1' }, {}, SEED + 601, 300, /mma backward, .*mma heads/,
      [51, 3 * 51, 4 * 51, 3 * 51], [2e-2, 6e-2, 6e-2]);
  });
});

describe('the reference GEMM (FH_GEMM_REFERENCE=1) against cuBLASLt', () => {
  // The project's own tiled GEMM (kernels/gemm_ref.cu: what racecheck runs) and cuBLASLt compute the
  // same loss and gradient: to fp32 rounding in the deterministic mode, to bf16 rounding of the
  // activations otherwise (both accumulate in fp32).
  for (const det of [1, 0]) {
    test(`${det ? 'fp32 deterministic' : 'bf16'}: loss, gradient and priority signal agree`, () => {
      const cfg = tinyConfig(['agent.atoms=51', 'agent.head_hidden=128']);
      const a = lossGradWith(cfg, det, { FH_GEMM_REFERENCE: '1' }, SEED + 501 + det, 64);
      const b = lossGradWith(cfg, det, {}, SEED + 501 + det, 64);
      expectClose(a, b, det ? 1e-5 : 2e-2, det ? 1e-4 : 6e-2);
    });
  }
});

describe('bf16 head outputs of the training passes', () => {
  // In bf16 mode the training passes' head outputs (online(s), online(s'), target(s')) are bf16 by
  // default: half the bytes of the head GEMMs' output and the loss's input. FH_LOGITS_BF16=0 keeps
  // fp32. The logits are then rounded to 8 mantissa bits before the softmaxes: loss and gradient move
  // by about that much.
  test('bf16: bf16 train logits (default) == fp32 train logits (FH_LOGITS_BF16=0) within bf16 tolerance', () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.head_hidden=128']);
    const a = lossGradWith(cfg, 0, {}, SEED + 401, 64);
    const b = lossGradWith(cfg, 0, { FH_LOGITS_BF16: '0' }, SEED + 401, 64);
    expect(a.engine).toMatch(/bf16 train logits/);
    expect(b.engine).toMatch(/fp32 train logits/);
    expectClose(a, b, 2e-2, 6e-2);
  });
  test('fp32 deterministic mode keeps fp32 train logits', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const a = lossGradWith(cfg, 1, {}, SEED + 402, 16);
    expect(a.engine).toMatch(/fp32 train logits/);
  });
});

describe('CUDA orchestration', () => {
  const keys: (keyof FhEpochStats)[] = ['loss_mean', 'loss_last', 'grad_norm_mean', 'grad_norm_max', 'q_avg_max', 'q_min',
    'q_max', 'q_mean', 'q_var', 'epsilon', 'env_steps', 'global_step'];

  /** Three epochs of the tiny config (13 steps an epoch, a hard target update every 5, plus sets) with env set: the
   * engine line, the epochs' scalars and the online parameters. */
  const threeEpochs = (env: Record<string, string | undefined>, sets: string[] = []) => {
    const cfg = tinyConfig(['agent.atoms=51', 'train.steps_per_epoch=13', 'agent.target_update_every=5', ...sets]);
    const gpu = loadNative('cuda');
    return withEnv(env, () =>
      withTrainer(gpu, cudaConfig(cfg), nativeMarket(market(cfg)), (h) => {
        const engine = info(gpu, h).engine;
        const stats = [1, 2, 3].map(() => runEpoch(gpu, h));
        return { engine, stats, params: params(gpu, h, 0) };
      }));
  };
  type ThreeEpochs = ReturnType<typeof threeEpochs>;
  /** a trained bit for bit like b: every epoch's scalars, the validation PnL and the online parameters. */
  const expectSameBits = (a: ThreeEpochs, b: ThreeEpochs, name: string) => {
    for (let e = 0; e < 3; e++) {
      const x = a.stats[e];
      const y = b.stats[e];
      if (x === undefined || y === undefined) throw new Error('missing epoch');
      expect(Number.isFinite(x.loss_mean)).toBe(true);
      for (const k of keys) expect(x[k], `${name}, epoch ${e + 1} ${String(k)}`).toStrictEqual(y[k]);
      expect(x.val.total_pnl).toStrictEqual(y.val.total_pnl);
      expect(x.host_syncs).toBe(1);
    }
    expect(Buffer.from(a.params.buffer).equals(Buffer.from(b.params.buffer)), `${name}: online params`).toBe(true);
  };

  test('graphs on == graphs off, bit for bit; one host sync per epoch', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const m = nativeMarket(market(cfg));
    const gpu = loadNative('cuda');
    const run = (graphs: number) => withTrainer(gpu, cudaConfig(cfg, { use_graphs: graphs }), m, (h) => {
      const stats = [1, 2, 3].map(() => runEpoch(gpu, h));
      const P = Number(info(gpu, h).n_params);
      const params = new Float32Array(P);
      expect(gpu.fh_trainer_get_params(h, 0, params, P)).toBe(FhStatus.OK);
      return { stats, params };
    });
    const on = run(1);
    const off = run(0);
    for (let e = 0; e < 3; e++) {
      const a = on.stats[e];
      const b = off.stats[e];
      if (a === undefined || b === undefined) throw new Error('missing epoch');
      for (const k of keys) expect(a[k], `epoch ${e + 1} ${String(k)}`).toStrictEqual(b[k]);
      expect(a.val.total_pnl).toStrictEqual(b.val.total_pnl);
      expect(a.host_syncs).toBe(1);
      expect(b.host_syncs).toBe(1);
      expect(Number.isFinite(a.loss_mean)).toBe(true);
    }
    expect(Buffer.from(on.params.buffer).equals(Buffer.from(off.params.buffer))).toBe(true);
  });

  test('step groups (FH_STEP_GROUP = 2 and 4) == one step a graph (the default), bit for bit, across hard target updates', () => {
    // 13 steps an epoch and a hard update every 5: a group ends at an update step, so groups start on every residue
    // and epochs end in short groups; Q statistics on the last step
    const cfg = tinyConfig(['agent.atoms=51', 'train.steps_per_epoch=13', 'agent.target_update_every=5']);
    const m = nativeMarket(market(cfg));
    const gpu = loadNative('cuda');
    const run = (group: string | undefined) => withEnv({ FH_STEP_GROUP: group }, () =>
      withTrainer(gpu, cudaConfig(cfg), m, (h) => {
        const engine = info(gpu, h).engine;
        const stats = [1, 2, 3].map(() => runEpoch(gpu, h));
        return { engine, stats, params: params(gpu, h, 0), target: params(gpu, h, 1) };
      }));
    const one = run(undefined);
    expect(one.engine).not.toContain('step groups');
    for (const [group, runs] of [['2', run('2')], ['4', run('4')]] as const) {
      expect(runs.engine).toContain(`step groups of ${group}`);
      for (let e = 0; e < 3; e++) {
        const a = runs.stats[e];
        const b = one.stats[e];
        if (a === undefined || b === undefined) throw new Error('missing epoch');
        expect(a.global_step).toBe(13 * (e + 1));
        for (const k of keys) expect(a[k], `group ${group}, epoch ${e + 1} ${String(k)}`).toStrictEqual(b[k]);
        expect(a.val.total_pnl).toStrictEqual(b.val.total_pnl);
        expect(a.host_syncs).toBe(1);
      }
      expect(Buffer.from(runs.params.buffer).equals(Buffer.from(one.params.buffer)), `group ${group} online`).toBe(true);
      expect(Buffer.from(runs.target.buffer).equals(Buffer.from(one.target.buffer)), `group ${group} target`).toBe(true);
    }
  });

  test('the replay chain reordered (early zero, the loss mean and IS weights on a branch) == the old order, bit for bit', () => {
    // the sampler's weights kernel zeroes the batch's leaves (FH_PER_EARLY_ZERO), the loss mean + counter copy
    // leave the side stream (FH_MEAN_BRANCH) and the next batch's weights run on that branch beside its gather
    // (FH_WEIGHTS_BRANCH): the same trees, batches and weights, with the partial and the full rebuild and with the
    // sampler reading the counter itself (FH_STEP_SNAPSHOT=0, which keeps the weights after the sampler), and with
    // steps captured four to a graph (FH_STEP_GROUP=4)
    // opt-in (measured neutral on an H100 and slower on an H200): unset = the old order
    const old = { FH_PER_EARLY_ZERO: undefined, FH_MEAN_BRANCH: undefined, FH_WEIGHTS_BRANCH: undefined };
    const all = { FH_PER_EARLY_ZERO: '1', FH_MEAN_BRANCH: '1', FH_WEIGHTS_BRANCH: '1' };
    const pairs: Array<[string, Record<string, string | undefined>, Record<string, string | undefined>]> = [
      ['all three', all, old],
      ['early zero alone', { ...old, FH_PER_EARLY_ZERO: '1' }, old],
      ['mean branch without the weights', { ...all, FH_WEIGHTS_BRANCH: undefined }, old],
      ['full rebuild', { ...all, FH_PER_FULL_REBUILD: '1' }, { ...old, FH_PER_FULL_REBUILD: '1' }],
      ['no counter copy', { ...all, FH_STEP_SNAPSHOT: '0' }, { ...old, FH_STEP_SNAPSHOT: '0' }],
      // several steps a graph: the branches fork and join inside one capture, step after step
      ['step groups of 4', { ...all, FH_STEP_GROUP: '4' }, old],
    ];
    for (const [name, envNew, envOld] of pairs) {
      const a = threeEpochs(envNew);
      const b = threeEpochs(envOld);
      expect(a.engine, `${name}: the switches took effect`).toContain('replay chain early-zero');
      if (envNew['FH_STEP_GROUP']) expect(a.engine).toContain(`step groups of ${envNew['FH_STEP_GROUP']}`);
      expect(b.engine).not.toContain('replay chain');
      expectSameBits(a, b, name);
    }
  });

  test("the first layer's account-column GEMM before its bias finish (FH_DW1_ACC_FIRST) == after it, bit for bit", () => {
    // the two write disjoint gradients, so only the order on head stream 1 moves; with hard target updates, and with
    // steps captured four to a graph. A window of 8 bars makes the first layer's market columns a multiple of 128
    // (D = 8 * 16 + 8), so its weight gradient is split in two GEMMs with or without the paired layout
    for (const group of [undefined, '4']) {
      const a = threeEpochs({ FH_DW1_ACC_FIRST: '1', FH_STEP_GROUP: group }, ['env.window=8']);
      const b = threeEpochs({ FH_DW1_ACC_FIRST: undefined, FH_STEP_GROUP: group }, ['env.window=8']);
      expect(a.engine, 'the switch took effect').toContain('dW1 account first');
      expect(b.engine).not.toContain('dW1 account first');
      expectSameBits(a, b, `step groups of ${group ?? 1}`);
    }
  });

  test('the target cache filled group by group beside the collection == all after it (FH_COLLECT_GROUPS=0), bit for bit', () => {
    // each group of collection steps whose slots are one chunk of the cache's fill (batch / n_envs steps) is filled
    // as soon as it is through, on the train stream beside the next groups; with groups of 1 and of 2 steps, with the
    // second epoch's groups off the ring's chunks (13-step episodes: its fill then waits for the last group), and
    // without collect-ahead
    const cases: Array<[string, string[], Record<string, string | undefined>]> = [
      ['groups of 1 step', [], {}],
      ['groups of 2 steps, 13-step episodes', ['train.batch_size=128', 'env.episode_len=13'], {}],
      ['groups of 2 steps without collect-ahead', ['train.batch_size=128'], { FH_COLLECT_AHEAD: '0' }],
    ];
    for (const [name, sets, env] of cases) {
      const a = threeEpochs({ FH_TARGET_CACHE: '1', FH_COLLECT_GROUPS: undefined, ...env }, sets);
      const b = threeEpochs({ FH_TARGET_CACHE: '1', FH_COLLECT_GROUPS: '0', ...env }, sets);
      expect(a.engine, `${name}: the groups took effect`).toContain('target cache (filled by collection groups)');
      expect(b.engine, `${name}: the cache is on`).toContain('target cache');
      expect(b.engine).not.toContain('collection groups');
      expectSameBits(a, b, name);
    }
  });

  test("the evaluation's metrics computed beside the next collection (the default) == after the flush, bit for bit", () => {
    // with collect-ahead the host waits for the evaluation's event by query and computes the metrics while the device
    // still collects; FH_EVAL_METRICS_EARLY=0 computes them after the epoch's one synchronisation
    const a = threeEpochs({ FH_EVAL_METRICS_EARLY: undefined });
    const b = threeEpochs({ FH_EVAL_METRICS_EARLY: '0' });
    expect(a.engine, 'the default took effect').toContain('collect ahead (metrics beside)');
    expect(b.engine).toContain('collect ahead');
    expect(b.engine).not.toContain('metrics beside');
    expectSameBits(a, b, 'metrics beside the collection');
    for (let e = 0; e < 3; e++) {
      const x = a.stats[e]?.val;
      const y = b.stats[e]?.val;
      expect(x, `epoch ${e + 1} validation metrics`).toBeDefined();
      expect(Number.isFinite(x?.total_pnl ?? NaN), `epoch ${e + 1}: the evaluation ran`).toBe(true);
      expect(x, `epoch ${e + 1} validation metrics`).toStrictEqual(y);
    }
  });

  /** a trained like b up to rounding: GEMMs planned for fewer SMs (cuBLASLt's SM count target) may run other
   * kernels, whose sums round differently, but the training must match closely. */
  const expectCloseTraining = (a: ThreeEpochs, b: ThreeEpochs) => {
    for (let e = 0; e < 3; e++) {
      const x = a.stats[e];
      const y = b.stats[e];
      if (x === undefined || y === undefined) throw new Error('missing epoch');
      expect(Number.isFinite(x.loss_mean), `epoch ${e + 1}`).toBe(true);
      expect(Math.abs(x.loss_mean - y.loss_mean), `epoch ${e + 1} loss`).toBeLessThanOrEqual(2e-2 * Math.abs(y.loss_mean));
      expect(x.host_syncs).toBe(1);
    }
    let worst = 0;
    for (let i = 0; i < a.params.length; i++) worst = Math.max(worst, Math.abs((a.params[i] ?? 0) - (b.params[i] ?? 0)));
    expect(worst, 'largest parameter difference after 3 epochs').toBeLessThan(5e-2);
  };

  test("the head outputs' GEMMs on SM shares (the default) train like each on the whole GPU (FH_HEADS_SM=0)", () => {
    // the collection's pass keeps the whole GPU
    const a = threeEpochs({ FH_HEADS_SM: undefined });
    const b = threeEpochs({ FH_HEADS_SM: '0' });
    expect(a.engine).toContain('heads on SM shares');
    expect(b.engine).not.toContain('heads on SM shares');
    expectCloseTraining(a, b);
  });

  test("the backward's side-stream weight gradients on a share of the SMs (FH_SIDE_SMS, the default) train like on the whole GPU", () => {
    const a = threeEpochs({ FH_SIDE_SMS: undefined });
    const b = threeEpochs({ FH_SIDE_SMS: '0' });
    expect(a.engine).toMatch(/side dW on \d+ SMs/);
    expect(b.engine).not.toContain('side dW on');
    expectCloseTraining(a, b);
  });

  test('bf16 batches gathered from the bf16 feature copy == converted from fp32, bit for bit', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const m = nativeMarket(market(cfg));
    const gpu = loadNative('cuda');
    const run = (bf16Source: boolean) => withEnv({ FH_GATHER_BF16_SOURCE: bf16Source ? '1' : '0' }, () =>
      withTrainer(gpu, cudaConfig(cfg), m, (h) => {
        const stats = [1, 2].map(() => runEpoch(gpu, h));
        const P = Number(info(gpu, h).n_params);
        const params = new Float32Array(P);
        expect(gpu.fh_trainer_get_params(h, 0, params, P)).toBe(FhStatus.OK);
        return { stats, params };
      }));
    const a = run(true);
    const b = run(false);
    for (let e = 0; e < 2; e++) {
      expect(a.stats[e]?.loss_mean, `epoch ${e + 1}`).toStrictEqual(b.stats[e]?.loss_mean);
      expect(a.stats[e]?.grad_norm_mean, `epoch ${e + 1}`).toStrictEqual(b.stats[e]?.grad_norm_mean);
    }
    expect(Buffer.from(a.params.buffer).equals(Buffer.from(b.params.buffer))).toBe(true);
  });

  test('a diverging network stops the epoch within a few steps (step scalars read while training)', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const m = nativeMarket(market(cfg));
    const gpu = loadNative('cuda');
    withTrainer(gpu, cudaConfig(cfg), m, (h) => {
      const P = Number(info(gpu, h).n_params);
      expect(gpu.fh_trainer_set_params(h, 0, new Float32Array(P).fill(1e30), P)).toBe(FhStatus.OK);
      const out: Partial<FhEpochStats> = {};
      expect(gpu.fh_trainer_run_epoch(h, out)).toBe(FhStatus.ERR_DIVERGED);
      const msg = gpu.fh_trainer_last_error(h) ?? '';
      const hit = /epoch 1, train step (\d+): (?:loss|gradient norm) became (?:NaN|Inf) \(stopped after (\d+) of (\d+) steps\)/.exec(msg);
      expect(hit, msg).not.toBeNull();
      const [, step, launched, total] = (hit ?? []).map(Number);
      expect(step).toBe(0);
      expect(total).toBe(cfg.train.steps_per_epoch);
      // at most 4 steps queued ahead of the last one read (kRunAhead), plus the one launched last
      expect(launched).toBeLessThanOrEqual(6);
    });
  });

  test('a GPU checkpoint resumes bit for bit', () => {
    const cfg = tinyConfig(['agent.atoms=51']);
    const m = nativeMarket(market(cfg));
    const gpu = loadNative('cuda');
    withTrainer(gpu, cudaConfig(cfg), m, (a) => {
      runEpoch(gpu, a);
      runEpoch(gpu, a);
      const ck = saveCheckpoint(gpu, a);
      withTrainer(gpu, cudaConfig(cfg), m, (b) => {
        expect(gpu.fh_trainer_load_checkpoint(b, ck, ck.length), gpu.fh_trainer_last_error(b) ?? '').toBe(FhStatus.OK);
        const x = runEpoch(gpu, a);
        const y = runEpoch(gpu, b);
        for (const k of keys) expect(y[k], String(k)).toStrictEqual(x[k]);
        expect(y.epoch).toBe(3);
      });
    });
  });

  test('edge market: the GPU agent learns the planted edge (and not a null market)', () => {
    const gpu = loadNative('cuda');
    const medianSharpe = (sets: string[]) => {
      const cfg = tinyConfig(sets);
      const m = nativeMarket(market(cfg));
      const sharpes = withTrainer(gpu, cudaConfig(cfg), m, (h) => {
        const out: number[] = [];
        for (let e = 0; e < 40; e++) out.push(runEpoch(gpu, h).val.sharpe ?? -Infinity);
        return out;
      });
      const last = sharpes.slice(-10).sort((a, b) => a - b);
      return { median: last[5] ?? -Infinity, all: sharpes.map((s) => s.toFixed(2)).join(' ') };
    };
    const edge = medianSharpe([]);
    const nul = medianSharpe(['data.synthetic.market=null']);
    // the CPU backend reaches a validation Sharpe of 3-9 after ~20 tiny epochs; buy-and-hold is about -1
    expect(edge.median, `edge val sharpe per epoch: ${edge.all}`).toBeGreaterThan(1);
    expect(nul.median, `null val sharpe per epoch: ${nul.all}`).toBeLessThan(edge.median);
  });
});

describe('the head outputs inside the loss (kernels/heads_loss.cu) against the head GEMMs + the loss kernel', () => {
  // bf16 mode with head hidden 128 (the reference's) runs the training passes' head outputs of online(s) and
  // online(s') inside the loss kernel by default; FH_HEADS_LOSS=0 runs cuBLASLt's head GEMMs, stores the logits
  // (bf16) and runs the loss kernel on them. The two differ by that rounding of the logits (and the order of sums),
  // so they are compared within bf16 tolerance, every parameter block's gradient on its own (a wrong head, bias or
  // action block cannot hide in the total). Batches with a partial 16-sample tile, terminal samples (disc 0), taken
  // actions past a branch's size (clamped), 17 / 51 / 56 atoms and other branch sizes.
  switchCases([
    ['atoms 51, branches 3,4,3, B 300', ['agent.atoms=51'], [3, 4, 3], 300],
    ['atoms 17, branches 3,4,3, B 63', ['agent.atoms=17'], [3, 4, 3], 63],
    ['atoms 56, branches 3,4,3, B 17', ['agent.atoms=56'], [3, 4, 3], 17],
    ['atoms 51, branches 3,2,3, B 63', ['agent.atoms=51', 'env.branch_sizes=[3,2,3]'], [3, 2, 3], 63],
  ], { FH_HEADS_LOSS: '1' }, { FH_HEADS_LOSS: '0' }, SEED + 701, /head outputs in the loss/, [1e-2, 6e-2, 6e-2]);
  // The Q statistics read online(s)'s logits, which the fused step does not store: their step runs the head GEMMs
  // for them (fh_net_train_heads). With lr 1e-12 (the weights stay) and priority exponent 0 (the sampler does not see
  // the loss's priorities, which differ by the logits' rounding) both runs train on the same batches, so an epoch's Q
  // statistics, from the same GEMMs, agree with the unfused path's to float rounding, and its loss to the logits'
  // rounding; logits never written would give Q statistics of zeros or of another step's rows.
  test('bf16, reference widths: an epoch\'s Q statistics and losses agree with FH_HEADS_LOSS=0', () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.hidden1=512', 'agent.hidden2=256', 'agent.head_hidden=128',
      'replay.alpha=0']);
    const a = frozenEpochs(cfg, { FH_HEADS_LOSS: '1' });
    const b = frozenEpochs(cfg, { FH_HEADS_LOSS: '0' });
    expect(a.engine).toMatch(/head outputs in the loss/);
    expect(b.engine).not.toMatch(/head outputs in the loss/);
    expectEpochStatsClose(a.st, b.st);
  });
});

type SnCheckFn = (h: TrainerHandle, n: number, out: Float64Array) => number;
let snCheckFn: SnCheckFn | null = null;

/** The s' argmax kernel's a*_d after one fh_trainer_loss_grad of B random samples with env, against the first argmax
 *  of the expected Q from the head GEMMs' logits (the CUDA-only test entry fh_test_trainer_sn_argmax): [on, pairs,
 *  mismatches, mismatches no order of sums explains, the largest Q gap among the mismatches]. */
function snArgmaxCheck(cfg: RunConfig, env: Record<string, string>, seed: number, B: number): number[] {
  const gpu: NativeLib = loadNative('cuda');
  // a CUDA-only test entry outside foxhunt.h, declared on the library file loadNative opened
  snCheckFn ??= koffi.load(gpu.path).func('fh_status fh_test_trainer_sn_argmax(fh_trainer *t, int n, double *out)') as
    SnCheckFn;
  const check = snCheckFn;
  const r = rng(seed);
  return withEnv(env, () =>
    withTrainer(gpu, cudaConfig(cfg, { use_graphs: 0 }), nativeMarket(market(cfg)), (h) => {
      expect(info(gpu, h).engine).toMatch(/s' argmax kernel/);
      const { obs, next, act, ret, disc, w } = randomBatch(r, B, info(gpu, h).obs_dim, 5);
      const loss: [number] = [NaN];
      expect(gpu.fh_trainer_loss_grad(h, B, obs, act, ret, disc, next, w, loss, new Float32Array(Number(
        info(gpu, h).n_params)), new Float32Array(B)), gpu.fh_trainer_last_error(h) ?? '').toBe(FhStatus.OK);
      const out = new Float64Array(5);
      expect(check(h, B, out), gpu.fh_trainer_last_error(h) ?? '').toBe(FhStatus.OK);
      return Array.from(out);
    }));
}

describe("online(s')'s argmax by its own kernel (FH_SN_ARGMAX, kernels/sn_argmax.cu) against the head GEMMs + loss", () => {
  // With FH_SN_ARGMAX=1..3 the train step's head GEMMs run over online(s)'s B rows alone; a kernel (8 or 12 warps a
  // block; 3: the logits of a GEMM pass kept in shared memory instead of a second pass) computes online(s')'s head
  // outputs from its head activations with mma.sync (the weights in shared memory), rounds each logit to bf16 as a
  // stored one, and keeps only a*_d; the loss reads those instead of online(s')'s logits. a*_d can differ from the
  // unfused path's only where two expected Qs agree to within the order of the sums. FH_SN_ARGMAX_BLOCKS caps the grid
  // (its blocks then loop over the tiles).
  const refCfg = (sets: string[]) => tinyConfig([...sets, 'agent.hidden1=512', 'agent.hidden2=256',
    'agent.head_hidden=128', 'train.batch_size=320']);
  for (const [sw, blocks, what] of [['1', '', '8 warps'], ['2', '', '12 warps'], ['3', '', '8 warps, logits kept'],
    ['1', '3', '8 warps, 3 blocks'], ['3', '2', 'logits kept, 2 blocks']] as const) {
    test(`${what}: a*_d equal the first argmax of the expected Q from the head GEMMs' logits`, () => {
      for (const [sets, B] of [[['agent.atoms=51'], 300], [['agent.atoms=17', 'env.branch_sizes=[3,2,3]'], 63],
        [['agent.atoms=56'], 17]] as const) {
        const env: Record<string, string> = { FH_SN_ARGMAX: sw, ...(blocks ? { FH_SN_ARGMAX_BLOCKS: blocks } : {}) };
        const [on = NaN, pairs = NaN, miss = NaN, wrong = NaN, gap = NaN] =
          snArgmaxCheck(refCfg([...sets]), env, SEED + 1001, B);
        const diffs = `seed ${SEED}, ${sets.join(' ')}, B ${B}: ${miss} of ${pairs} differ, ${wrong} beyond the ` +
          `order of sums, largest gap ${gap}`;
        expect(on, diffs).toBe(1);
        expect(pairs, diffs).toBe(3 * B);
        expect(wrong, diffs).toBe(0);
        expect(miss, diffs).toBeLessThanOrEqual(Math.ceil(0.02 * pairs));
      }
    });
  }
  switchCases([
    ['atoms 51, branches 3,4,3, B 300', ['agent.atoms=51'], [3, 4, 3], 300],
    ['atoms 17, branches 3,4,3, B 63', ['agent.atoms=17'], [3, 4, 3], 63],
    ['atoms 56, branches 3,2,3, B 17', ['agent.atoms=56', 'env.branch_sizes=[3,2,3]'], [3, 2, 3], 17],
  ], { FH_SN_ARGMAX: '1' }, { FH_SN_ARGMAX: '0' }, SEED + 1002, /s' argmax kernel \(8 warps\)/, [1e-2, 6e-2, 6e-2]);
  switchCases([
    ['12 warps: atoms 51, branches 3,4,3, B 300', ['agent.atoms=51'], [3, 4, 3], 300],
  ], { FH_SN_ARGMAX: '2' }, { FH_SN_ARGMAX: '0' }, SEED + 1003, /s' argmax kernel \(12 warps\)/, [1e-2, 6e-2, 6e-2]);
  switchCases([
    ['logits kept: atoms 51, branches 3,4,3, B 300', ['agent.atoms=51'], [3, 4, 3], 300],
    ['logits kept: atoms 56, branches 3,2,3, B 17', ['agent.atoms=56', 'env.branch_sizes=[3,2,3]'], [3, 2, 3], 17],
  ], { FH_SN_ARGMAX: '3' }, { FH_SN_ARGMAX: '0' }, SEED + 1004, /s' argmax kernel \(8 warps, logits kept\)/,
  [1e-2, 6e-2, 6e-2]);
  // Inside the captured train step (graphs, prefetch, the replay chain, the paired layout where it is on): with lr
  // 1e-12 (the weights stay) and priority exponent 0 (both runs sample the same batches) an epoch's Q statistics (from
  // online(s)'s logits, which the step still writes) and loss agree with the unfused path's.
  test("bf16, reference widths, graphs: an epoch's Q statistics and losses agree with FH_SN_ARGMAX=0", () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.hidden1=512', 'agent.hidden2=256', 'agent.head_hidden=128',
      'replay.alpha=0']);
    const a = frozenEpochs(cfg, { FH_SN_ARGMAX: '1' });
    const b = frozenEpochs(cfg, { FH_SN_ARGMAX: '0' });
    expect(a.engine).toMatch(/s' argmax kernel/);
    expect(b.engine).not.toMatch(/s' argmax kernel/);
    expectEpochStatsClose(a.st, b.st, 1e-3);
  });
});

describe('the head outputs by the streaming kernel (FH_HEADS_OUT, kernels/heads_out.cu) against one GEMM per head', () => {
  // With FH_HEADS_OUT=1..6 the training pass's head outputs (bf16 logits of online(s) and online(s')) come from one
  // persistent kernel: one head a block with its weights in shared memory, row tiles of the activations streamed
  // through a deep cp.async pipeline, mma.sync per warp over a run of the head's column tiles, the bias added into a
  // shared staging tile written out by the block. Against cuBLASLt's per-head GEMMs the logits differ only by the
  // order of the fp32 sums (then the bf16 rounding), so loss, priority signal and every parameter block's gradient
  // agree closely. Batches with a partial tile (2B = 600, 126 and 34 rows) and head widths other than the
  // reference's (24 / 56 / 72 and 56 / 112 columns: other shares of the warps). '1' runs 128-row tiles with 16 warps
  // (four row groups), '2' 64-row tiles with 16, '3' 32-row tiles at two blocks an SM, '4' 128-row tiles, 2 stages;
  // '5' and '6' are '1' and '2' with each warp writing out its own results (no block barrier before the copy-out).
  switchCases([
    ['atoms 51, branches 3,4,3, B 300', ['agent.atoms=51'], [3, 4, 3], 300],
    ['atoms 17, branches 3,4,3, B 63', ['agent.atoms=17'], [3, 4, 3], 63],
    ['atoms 56, branches 3,2,3, B 17', ['agent.atoms=56', 'env.branch_sizes=[3,2,3]'], [3, 2, 3], 17],
  ], { FH_HEADS_OUT: '1' }, { FH_HEADS_OUT: '0' }, SEED + 901, /heads streamed/, [2e-3, 1e-2, 1e-2]);
  for (const [config, what] of [['2', '64-row tiles, 16 warps'], ['3', '32-row tiles, 2 blocks an SM'],
    ['4', '128-row tiles, 2 stages'], ['5', '128-row tiles, warps\' own copy-outs'],
    ['6', '64-row tiles, warps\' own copy-outs']] as const) {
    switchCases([
      [`${what}: atoms 51, branches 3,4,3, B 300`, ['agent.atoms=51'], [3, 4, 3], 300],
    ], { FH_HEADS_OUT: config }, { FH_HEADS_OUT: '0' }, SEED + 900 + Number(config), /heads streamed/,
    [2e-3, 1e-2, 1e-2]);
  }
  // Inside the captured train step (graphs, prefetch, the replay chain): with lr 1e-12 (the weights stay) and
  // priority exponent 0 (both runs sample the same batches) an epoch's Q statistics, read from pass 0's logits, agree
  // with the per-head GEMMs' path; logits not written, or written to another pass's rows, would not.
  test('bf16, reference widths, graphs: an epoch\'s Q statistics and losses agree with the per-head GEMMs', () => {
    const cfg = tinyConfig(['agent.atoms=51', 'agent.hidden1=512', 'agent.hidden2=256', 'agent.head_hidden=128',
      'replay.alpha=0']);
    const a = frozenEpochs(cfg, { FH_HEADS_OUT: '1' });
    const b = frozenEpochs(cfg, { FH_HEADS_OUT: '0' });
    expect(a.engine).toMatch(/heads streamed/);
    expect(b.engine).not.toMatch(/heads streamed/);
    expectEpochStatsClose(a.st, b.st, 1e-3);
  });
});
