/**
 * The native env step (kernels/env.cuh through fh_trainer_env_step) against the TypeScript reference
 * env (src/env/reference.ts) on random action sequences: identical positions, cursors, equity, costs,
 * rewards, dones and resets, bit for bit; observations equal; and the native evaluation of the flat
 * and buy-and-hold baselines equal src/env/evaluate.ts.
 *
 * Reset counter convention (DESIGN §4/§6): every env resets at creation with counter 0; an env whose
 * episode ends on step c (0-based, the c-th call) resets with counter c + 1.
 */
import { describe, expect, test } from 'vitest';
import type { RunConfig } from '../../src/config/schema.js';
import { buyHoldPolicy, evaluatePolicy, flatPolicy } from '../../src/env/evaluate.js';
import type { Policy } from '../../src/env/evaluate.js';
import type { Metrics } from '../../src/env/metrics.js';
import {
  envObserve, envParams, envReset, envStep, marketView, newState, newStepResult, obsDim, resolveRewardScale,
} from '../../src/env/reference.js';
import type { EnvState } from '../../src/env/reference.js';
import { FhStatus } from '../../src/native/binding.js';
import type { FhMetrics } from '../../src/native/binding.js';
import { create, firstMismatch, info, lib, market, nativeConfig, nativeMarket, rng, runEpoch, tinyConfig } from './helpers.js';

interface Case {
  name: string;
  sets: string[];
}

const CASES: Case[] = [
  {
    name: 'flatten at session breaks, 3 contracts, 5 directions, stops',
    sets: ['env.n_envs=24', 'env.episode_len=30', 'instrument.max_contracts=3', 'env.branch_sizes=[5, 4, 3]', 'env.stop_atr_mult=0.5'],
  },
  {
    name: 'hold through gaps, risk penalty, fixed reward scale',
    sets: ['env.n_envs=16', 'env.episode_len=25', 'env.flatten_at_session_break=false', 'env.risk_penalty=0.01',
      'env.reward_scale=120', 'instrument.max_contracts=2', 'env.stop_atr_mult=0.3'],
  },
];

function compareRun(cfg: RunConfig, steps: number, seed: number): { dones: number; stopsOrTrades: number } {
  const l = lib();
  const m = market(cfg);
  const h = create(l, nativeConfig(cfg), nativeMarket(m));
  try {
    const N = cfg.env.n_envs;
    const mv = marketView(m);
    const p = envParams(cfg, resolveRewardScale(cfg, m.atr, m.split.trainBegin, m.split.trainEnd));
    expect(info(l, h).reward_scale).toBe(p.rewardScale);
    const D = obsDim(p, m.nFeatures);
    const seedBig = BigInt(cfg.seed);
    const states: EnvState[] = Array.from({ length: N }, (_, e) => {
      const s = newState();
      envReset(mv, p, s, seedBig, e, 0n);
      return s;
    });
    const r = newStepResult();
    const rand = rng(seed);
    const [n0, n1, n2] = cfg.env.branch_sizes;
    const act = new Int32Array(N * 3);
    const reward = new Float32Array(N);
    const done = new Uint8Array(N);
    const position = new Int32Array(N);
    const cursor = new BigInt64Array(N);
    const equity = new Float64Array(N);
    const cost = new Float64Array(N);
    const obsNative = new Float32Array(N * D);
    const obsRef = new Float32Array(N * D);
    let dones = 0;
    let events = 0;
    for (let c = 0; c < steps; c++) {
      // observations before the step (including every reset state)
      expect(l.fh_trainer_env_observe(h, obsNative)).toBe(FhStatus.OK);
      for (let e = 0; e < N; e++) envObserve(mv, p, states[e] as EnvState, obsRef, e * D);
      expect(firstMismatch(obsNative, obsRef), `observations before step ${c}`).toBeNull();
      for (let i = 0; i < N; i++) {
        act[3 * i] = Math.floor(rand() * n0);
        act[3 * i + 1] = Math.floor(rand() * n1);
        act[3 * i + 2] = Math.floor(rand() * n2);
      }
      expect(l.fh_trainer_env_step(h, act, reward, done, position, cursor, equity, cost)).toBe(FhStatus.OK);
      const ref = { reward: new Float32Array(N), done: new Uint8Array(N), position: new Int32Array(N),
        cursor: new BigInt64Array(N), equity: new Float64Array(N), cost: new Float64Array(N) };
      for (let e = 0; e < N; e++) {
        const s = states[e] as EnvState;
        envStep(mv, p, s, act[3 * e] as number, act[3 * e + 1] as number, act[3 * e + 2] as number, r);
        ref.reward[e] = r.reward;
        ref.done[e] = r.done ? 1 : 0;
        ref.position[e] = s.pos;
        ref.cursor[e] = BigInt(s.t);
        ref.equity[e] = s.equity;
        ref.cost[e] = r.cost;
        events += r.tradesClosed;
        if (r.done) {
          dones++;
          envReset(mv, p, s, seedBig, e, BigInt(c + 1));
        }
      }
      expect(firstMismatch(reward, ref.reward), `reward, step ${c}`).toBeNull();
      expect(firstMismatch(done, ref.done), `done, step ${c}`).toBeNull();
      expect(firstMismatch(position, ref.position), `position, step ${c}`).toBeNull();
      expect(firstMismatch(cursor, ref.cursor), `cursor, step ${c}`).toBeNull();
      expect(firstMismatch(equity, ref.equity), `equity, step ${c}`).toBeNull();
      expect(firstMismatch(cost, ref.cost), `cost, step ${c}`).toBeNull();
    }
    return { dones, stopsOrTrades: events };
  } finally {
    l.fh_trainer_destroy(h);
  }
}

describe('native env vs src/env/reference.ts', () => {
  test.each(CASES)('$name', ({ sets }) => {
    const cfg = tinyConfig(sets);
    const { dones, stopsOrTrades } = compareRun(cfg, 200, 11);
    // the sequences exercised what they claim: many episode ends and closed trades
    expect(dones).toBeGreaterThan(cfg.env.n_envs * 3);
    expect(stopsOrTrades).toBeGreaterThan(500);
  });

  test('stop exits happen and match (wide stop multiplier, always-long actions)', () => {
    const cfg = tinyConfig(['env.n_envs=8', 'env.episode_len=40', 'env.stop_atr_mult=0.25']);
    const l = lib();
    const m = market(cfg);
    const h = create(l, nativeConfig(cfg), nativeMarket(m));
    try {
      const mv = marketView(m);
      const p = envParams(cfg, resolveRewardScale(cfg, m.atr, m.split.trainBegin, m.split.trainEnd));
      const states = Array.from({ length: 8 }, (_, e) => {
        const s = newState();
        envReset(mv, p, s, BigInt(cfg.seed), e, 0n);
        return s;
      });
      const r = newStepResult();
      const act = new Int32Array(24);
      for (let e = 0; e < 8; e++) act.set([e % 2 === 0 ? 2 : 0, 3, 1], 3 * e); // long/short full size, tight stop
      const position = new Int32Array(8);
      const cost = new Float64Array(8);
      const reward = new Float32Array(8);
      let stops = 0;
      for (let c = 0; c < 100; c++) {
        expect(l.fh_trainer_env_step(h, act, reward, null, position, null, null, cost)).toBe(FhStatus.OK);
        for (let e = 0; e < 8; e++) {
          const s = states[e] as EnvState;
          envStep(mv, p, s, act[3 * e] as number, act[3 * e + 1] as number, act[3 * e + 2] as number, r);
          if (r.tradesClosed > 0 && s.pos === 0) stops++;
          expect(position[e]).toBe(s.pos);
          expect(cost[e]).toBe(r.cost);
          expect(reward[e]).toBe(r.reward);
          if (r.done) envReset(mv, p, s, BigInt(cfg.seed), e, BigInt(c + 1));
        }
      }
      expect(stops).toBeGreaterThan(20);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });
});

function same(native: FhMetrics, ref: Metrics): void {
  const nul = (x: number): number | null => (Number.isNaN(x) ? null : x);
  expect(nul(native.sharpe)).toBe(ref.sharpe);
  expect(nul(native.sortino)).toBe(ref.sortino);
  expect(native.max_drawdown).toBe(ref.max_dd);
  expect(native.max_drawdown_pct).toBe(ref.max_dd_pct);
  expect(nul(native.profit_factor)).toBe(ref.profit_factor);
  expect(native.total_pnl).toBe(ref.total_pnl);
  expect(native.trades).toBe(ref.trades);
  expect(nul(native.win_rate)).toBe(ref.win_rate);
  expect(native.turnover).toBe(ref.turnover);
  expect(native.sessions).toBe(ref.sessions);
}

describe('native evaluation vs src/env/evaluate.ts', () => {
  test('flat and buy-and-hold baselines are identical', () => {
    const cfg = tinyConfig(['instrument.max_contracts=2']);
    const l = lib();
    const m = market(cfg);
    const h = create(l, nativeConfig(cfg, { train_steps: 0 }), nativeMarket(m));
    try {
      const stats = runEpoch(l, h);
      const mv = marketView(m);
      const p = envParams(cfg, resolveRewardScale(cfg, m.atr, m.split.trainBegin, m.split.trainEnd));
      const opts = { segments: cfg.eval.segments, initialCapital: cfg.env.initial_capital };
      const flat = evaluatePolicy(mv, p, m.split, flatPolicy(p), opts).metrics;
      const bh = evaluatePolicy(mv, p, m.split, buyHoldPolicy(p), opts).metrics;
      same(stats.flat, flat);
      same(stats.buy_hold, bh);
      expect(bh.trades).toBeGreaterThan(0);
      expect(flat.total_pnl).toBe(0);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('the greedy evaluation equals evaluate.ts driving the native Q values', () => {
    const cfg = tinyConfig(['env.n_envs=32', 'env.episode_len=40', 'instrument.max_contracts=2']);
    const l = lib();
    const m = market(cfg);
    const h = create(l, nativeConfig(cfg, { train_steps: 40, eps_decay_steps: 200 }), nativeMarket(m));
    try {
      const stats = runEpoch(l, h);
      const mv = marketView(m);
      const p = envParams(cfg, resolveRewardScale(cfg, m.atr, m.split.trainBegin, m.split.trainEnd));
      const branch = cfg.env.branch_sizes;
      const nAct = branch[0] + branch[1] + branch[2];
      const argmax = (q: Float32Array, off: number, n: number): number => {
        let best = 0;
        for (let i = 1; i < n; i++) if ((q[off + i] as number) > (q[off + best] as number)) best = i;
        return best;
      };
      const greedy: Policy = {
        needsObs: true,
        act(obs, _cursors, n, out) {
          const q = new Float32Array(n * nAct);
          expect(l.fh_trainer_q_values(h, n, obs as Float32Array, q)).toBe(FhStatus.OK);
          for (let e = 0; e < n; e++) {
            out[3 * e] = argmax(q, e * nAct, branch[0]);
            out[3 * e + 1] = argmax(q, e * nAct + branch[0], branch[1]);
            out[3 * e + 2] = argmax(q, e * nAct + branch[0] + branch[1], branch[2]);
          }
        },
      };
      const ref = evaluatePolicy(mv, p, m.split, greedy, { segments: cfg.eval.segments, initialCapital: cfg.env.initial_capital });
      same(stats.val, ref.metrics);
      expect(ref.metrics.trades).toBeGreaterThan(0); // a policy that trades, so the comparison means something
    } finally {
      l.fh_trainer_destroy(h);
    }
  });
});
