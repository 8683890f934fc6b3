/**
 * One epoch of the CPU trainer, white-box: the reported scalars follow their definitions (counters,
 * epsilon and beta schedules, replay size, timings, host syncs 0); the auto batch size; no training
 * before learning_starts; and the collected actions are exactly epsilon-greedy from Philox
 * (eps = 1: the EXPLORE streams of DESIGN §6; eps = 0: the argmax of the online Q on the stored
 * state), read back from the replay rows in a checkpoint.
 */
import { describe, expect, test } from 'vitest';
import { philoxDraw, PURPOSE, scaleU32 } from '../../src/env/philox.js';
import { FhStatus } from '../../src/native/binding.js';
import type { FhEpochStats } from '../../src/native/binding.js';
import {
  create, info, lib, market, nativeConfig, nativeMarket, params, parseCheckpoint, runEpoch, saveCheckpoint, tinyConfig,
} from './helpers.js';

const f = Math.fround;
const SMALL = ['env.n_envs=16', 'env.episode_len=20', 'train.steps_per_epoch=12', 'train.batch_size=16',
  'replay.capacity=4096', 'agent.hidden1=16', 'agent.hidden2=16', 'agent.head_hidden=8'];

describe('native epoch', () => {
  test('scalars follow their definitions', () => {
    const cfg = tinyConfig([...SMALL, 'replay.capacity=480', 'train.eps_decay_steps=700', 'replay.beta_steps=30', 'train.qstats_every=5']);
    const l = lib();
    const h = create(l, nativeConfig(cfg), nativeMarket(market(cfg)));
    try {
      const N = 16;
      const T = 20;
      const S = 12;
      const rows = 480 / N;
      for (let k = 1; k <= 3; k++) {
        const s: FhEpochStats = runEpoch(l, h);
        expect(s.epoch).toBe(k);
        expect(s.env_steps).toBe(k * T * N);
        expect(s.global_step).toBe(k * S);
        expect(s.batch_size).toBe(16);
        expect(s.replay_size).toBe(Math.min(k * T, rows) * N);
        const eps = f(cfg.train.eps_end) + (f(cfg.train.eps_start) - f(cfg.train.eps_end)) * Math.exp(-(k * T * N) / 700);
        expect(s.epsilon).toBeCloseTo(eps, 12);
        const beta = f(f(cfg.replay.beta_start) + (f(cfg.replay.beta_end) - f(cfg.replay.beta_start)) * Math.min(1, (k * S) / 30));
        expect(s.beta).toBeCloseTo(beta, 6);
        expect(s.host_syncs).toBe(0);
        for (const t of [s.collect_ms, s.train_ms, s.eval_ms]) expect(t).toBeGreaterThan(0);
        expect(s.total_ms).toBeCloseTo(s.collect_ms + s.train_ms + s.eval_ms, 6);
        expect(s.env_steps_per_s).toBeCloseTo((N * T) / (s.collect_ms / 1000), 3);
        expect(s.samples_per_s).toBeCloseTo((S * 16) / (s.train_ms / 1000), 3);
        expect(Number.isFinite(s.loss_mean) && Number.isFinite(s.loss_last)).toBe(true);
        expect(s.grad_norm_max).toBeGreaterThanOrEqual(s.grad_norm_mean);
        expect(s.q_min).toBeLessThanOrEqual(s.q_mean);
        expect(s.q_mean).toBeLessThanOrEqual(s.q_max);
        expect(s.q_avg_max).toBeLessThanOrEqual(s.q_max);
        expect(s.q_var).toBeGreaterThanOrEqual(0);
      }
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('auto batch size: a power of two under the cap, low on CPU', () => {
    const cfg = tinyConfig(SMALL);
    const l = lib();
    const m = nativeMarket(market(cfg));
    for (const [cap, want] of [[48, 32], [7, 4], [100000, 256]] as const) {
      const h = create(l, nativeConfig(cfg, { batch_size: 0, batch_cap: cap }), m);
      try {
        expect(info(l, h).batch_size).toBe(want);
      } finally {
        l.fh_trainer_destroy(h);
      }
    }
  });

  test('no training before learning_starts transitions are sampleable', () => {
    const cfg = tinyConfig(SMALL);
    const l = lib();
    const h = create(l, nativeConfig(cfg, { learning_starts: 16 * 30 }), nativeMarket(market(cfg)));
    try {
      const first = runEpoch(l, h); // 20 rows written, 17 complete: 272 < 480
      expect(first.global_step).toBe(0);
      expect(Number.isNaN(first.loss_mean)).toBe(true);
      const second = runEpoch(l, h); // 37 complete rows: 592 >= 480
      expect(second.global_step).toBe(12);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('epsilon = 1: every action comes from the EXPLORE Philox streams', () => {
    const cfg = tinyConfig([...SMALL, 'train.eps_start=1', 'train.eps_end=1', 'env.branch_sizes=[5, 4, 3]']);
    const l = lib();
    const h = create(l, nativeConfig(cfg, { train_steps: 0 }), nativeMarket(market(cfg)));
    try {
      runEpoch(l, h);
      const inf = info(l, h);
      const ck = parseCheckpoint(saveCheckpoint(l, h), Number(inf.n_params), 16, 4096);
      const seed = BigInt(cfg.seed);
      const n = cfg.env.branch_sizes;
      for (let c = 0; c < 20; c++) {
        for (let e = 0; e < 16; e++) {
          for (let d = 0; d < 3; d++) {
            const w = philoxDraw(seed, e, BigInt(c), PURPOSE.EXPLORE_BRANCH_0 + d);
            expect(ck.act[3 * (c * 16 + e) + d], `step ${c} env ${e} branch ${d}`).toBe(scaleU32(w[1] as number, n[d] as number));
          }
        }
      }
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('epsilon = 0: every action is the argmax of the online Q on the stored state', () => {
    const cfg = tinyConfig([...SMALL, 'train.eps_start=0', 'train.eps_end=0']);
    const l = lib();
    const pm = market(cfg);
    const h = create(l, nativeConfig(cfg, { train_steps: 0 }), nativeMarket(pm));
    try {
      runEpoch(l, h);
      const inf = info(l, h);
      const D = inf.obs_dim;
      const ck = parseCheckpoint(saveCheckpoint(l, h), Number(inf.n_params), 16, 4096);
      const W = cfg.env.window;
      const F = pm.nFeatures;
      const rowsWritten = 20 * 16;
      const obs = new Float32Array(rowsWritten * D);
      for (let s = 0; s < rowsWritten; s++) {
        const t = ck.bar[s] as number;
        obs.set(pm.features.subarray((t - W + 1) * F, (t + 1) * F), s * D);
        obs.set(ck.account.subarray(8 * s, 8 * s + 8), s * D + W * F);
      }
      const n = cfg.env.branch_sizes;
      const nAct = n[0] + n[1] + n[2];
      const q = new Float32Array(rowsWritten * nAct);
      expect(l.fh_trainer_q_values(h, rowsWritten, obs, q)).toBe(FhStatus.OK);
      const distinct = new Set<number>();
      for (let s = 0; s < rowsWritten; s++) {
        let off = s * nAct;
        for (let d = 0; d < 3; d++) {
          let best = 0;
          for (let a = 1; a < (n[d] as number); a++) if ((q[off + a] as number) > (q[off + best] as number)) best = a;
          expect(ck.act[3 * s + d], `slot ${s} branch ${d}`).toBe(best);
          if (d === 0) distinct.add(best);
          off += n[d] as number;
        }
      }
      expect(distinct.size).toBeGreaterThan(1); // the states differ enough to change the greedy direction
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('target network: hard copy every K train steps, Polyak with tau', () => {
    const l = lib();
    const cfg = tinyConfig(SMALL); // 12 train steps per epoch
    const m = nativeMarket(market(cfg));
    const P = (h: ReturnType<typeof create>, which: number): Float32Array => params(l, h, which);
    const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer));
    const run = (over: Record<string, number>, check: (online: Float32Array, target: Float32Array, init: Float32Array) => void): void => {
      const h = create(l, nativeConfig(cfg, over), m);
      try {
        const init = P(h, 1);
        expect(same(init, P(h, 0))).toBe(true); // target = online at creation
        runEpoch(l, h);
        check(P(h, 0), P(h, 1), init);
      } finally {
        l.fh_trainer_destroy(h);
      }
    };
    run({ target_update_every: 12, tau: 0 }, (on, tg, init) => {
      expect(same(on, init)).toBe(false);
      expect(same(tg, on)).toBe(true); // copied at step 12, the last of the epoch
    });
    run({ target_update_every: 5, tau: 0 }, (on, tg, init) => {
      expect(same(tg, on)).toBe(false); // copied at step 10, two Adam steps behind
      expect(same(tg, init)).toBe(false);
    });
    run({ target_update_every: 1000, tau: 0 }, (_on, tg, init) => expect(same(tg, init)).toBe(true));
    run({ tau: 1 }, (on, tg) => expect(same(tg, on)).toBe(true));
    run({ tau: 0.01 }, (on, tg, init) => {
      expect(same(tg, on)).toBe(false);
      expect(same(tg, init)).toBe(false);
    });
  });
});
