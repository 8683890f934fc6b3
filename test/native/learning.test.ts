/**
 * Learning is real (CPU backend, config/runs/tiny.toml, seconds per run):
 *  - edge market (a hidden regime with a known optimal policy, the oracle): after 30 epochs the
 *    greedy validation Sharpe, averaged over the last 5 epochs, is positive and well above the flat
 *    baseline (no PnL, Sharpe null), far above a random policy, and at least 20% of the oracle's;
 *  - null market (a driftless random walk): the same run finds no edge (mean Sharpe below 1).
 * Seeds: trainer seed 1, market seed 1 (tiny.toml). Observed on this code: edge ~17 (oracle 38),
 * null ~ -10; the thresholds leave room for other machines' float libraries.
 */
import { describe, expect, test } from 'vitest';
import type { RunConfig } from '../../src/config/schema.js';
import { generateSynthetic } from '../../src/data/synthetic.js';
import { evaluatePolicy, targetPolicy } from '../../src/env/evaluate.js';
import type { Policy } from '../../src/env/evaluate.js';
import { envParams, marketView, resolveRewardScale } from '../../src/env/reference.js';
import type { FhEpochStats } from '../../src/native/binding.js';
import { create, lib, market, nativeConfig, nativeMarket, rng, runEpochAsync, tinyConfig } from './helpers.js';

const EPOCHS = 30;
const LAST = 5;

async function train(cfg: RunConfig): Promise<FhEpochStats[]> {
  const l = lib();
  const h = create(l, nativeConfig(cfg), nativeMarket(market(cfg)));
  try {
    const out: FhEpochStats[] = [];
    for (let e = 0; e < EPOCHS; e++) out.push(await runEpochAsync(l, h));
    return out;
  } finally {
    l.fh_trainer_destroy(h);
  }
}

const mean = (x: number[]): number => x.reduce((a, b) => a + b, 0) / x.length;
/** NaN (null) Sharpe counts as 0: no PnL variation, no edge. */
const sharpeOf = (s: FhEpochStats): number => (Number.isNaN(s.val.sharpe) ? 0 : s.val.sharpe);

function randomPolicy(branches: readonly number[], seed: number): Policy {
  const r = rng(seed);
  return {
    needsObs: false,
    act(_obs, _cursors, n, out) {
      for (let e = 0; e < n; e++) for (let d = 0; d < 3; d++) out[3 * e + d] = Math.floor(r() * (branches[d] as number));
    },
  };
}

describe('native CPU learning', () => {
  test('edge market: clearly above flat and random, a clear fraction of the oracle', async () => {
    const cfg = tinyConfig();
    expect(cfg.data.synthetic.market).toBe('edge');
    const m = market(cfg);
    const { regime } = generateSynthetic(cfg.data.synthetic, cfg.instrument);
    const p = envParams(cfg, resolveRewardScale(cfg, m.atr, m.split.trainBegin, m.split.trainEnd));
    const opts = { segments: cfg.eval.segments, initialCapital: cfg.env.initial_capital };
    const oracle = evaluatePolicy(marketView(m), p, m.split, targetPolicy(p, (t) => (regime[t] ?? 0) * p.maxContracts), opts).metrics;
    const random = evaluatePolicy(marketView(m), p, m.split, randomPolicy(cfg.env.branch_sizes, 99), opts).metrics;
    expect(oracle.sharpe).not.toBeNull();
    const oracleSharpe = oracle.sharpe as number;
    expect(oracleSharpe).toBeGreaterThan(10);

    const stats = await train(cfg);
    const tail = stats.slice(-LAST);
    const sharpe = mean(tail.map(sharpeOf));
    const pnl = mean(tail.map((s) => s.val.total_pnl));
    const last = tail[LAST - 1] as FhEpochStats;
    expect(Number.isNaN(last.flat.sharpe)).toBe(true); // flat: no PnL at all
    expect(last.flat.total_pnl).toBe(0);
    expect(sharpe).toBeGreaterThan(5);
    expect(pnl).toBeGreaterThan(0);
    expect(sharpe).toBeGreaterThan((random.sharpe ?? 0) + 10);
    expect(sharpe).toBeGreaterThan(0.2 * oracleSharpe);
    // it learned: the first epoch (mostly random data, barely trained) was far worse
    expect(sharpeOf(stats[0] as FhEpochStats)).toBeLessThan(sharpe);
  }, 240_000);

  test('null market: no edge is found', async () => {
    const cfg = tinyConfig(['data.synthetic.market=null']);
    const stats = await train(cfg);
    const tail = stats.slice(-LAST);
    expect(mean(tail.map(sharpeOf))).toBeLessThan(1);
  }, 240_000);
});
