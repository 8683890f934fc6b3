/**
 * Replay as the train step sees it (fh_trainer_replay_sample) against the replay rows themselves,
 * read from a checkpoint (payload layout of native/src/cpu/state.cpp): DESIGN §6's ring of rows
 * (slot = row*N + env), leaves 0 for the n newest (incomplete) rows and > 0 for every complete
 * transition, n-step returns assembled at sample time and stopping at a done (disc 0, else gamma^n),
 * s' = the stored state n rows later (around the ring), observations rebuilt from the feature
 * matrix by bar index, and importance weights from the leaves. Bit for bit where the math is float32.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import {
  create, firstMismatch, info, lib, market, nativeConfig, nativeMarket, parseCheckpoint, runEpoch, saveCheckpoint, tinyConfig,
} from './helpers.js';

const f = Math.fround;

describe('native replay sampling', () => {
  test('slots, priorities, n-step returns, s\' and observations follow DESIGN §6', () => {
    const N = 16;
    const T = 30;
    const rows = 40;
    const cfg = tinyConfig([`env.n_envs=${N}`, `env.episode_len=${T}`, `replay.capacity=${N * rows}`,
      'train.steps_per_epoch=4', 'train.batch_size=32', 'agent.n_step=3']);
    const n = cfg.agent.n_step;
    const gamma = f(cfg.agent.gamma);
    const l = lib();
    const pm = market(cfg);
    const h = create(l, nativeConfig(cfg), nativeMarket(pm));
    try {
      runEpoch(l, h);
      runEpoch(l, h); // 60 rows written into a ring of 40: it wrapped
      const inf = info(l, h);
      const D = inf.obs_dim;
      const P = Number(inf.n_params);
      const C = N * rows;
      const ck = parseCheckpoint(saveCheckpoint(l, h), P, N, C);
      const envCounter = ck.envCounter;
      expect(envCounter).toBe(2 * T);
      const { bar, act, done, reward, account, leaf } = ck;

      // the n newest rows are incomplete (leaf 0); every other row is sampleable
      const incomplete = new Set(Array.from({ length: n }, (_, k) => (envCounter - 1 - k) % rows));
      for (let s = 0; s < C; s++) {
        const row = Math.floor(s / N);
        if (incomplete.has(row)) expect(leaf[s], `slot ${s}`).toBe(0);
        else expect(leaf[s], `slot ${s}`).toBeGreaterThan(0);
      }

      const B = 256;
      const beta = 0.6;
      const slot = new BigInt64Array(B);
      const nextSlot = new BigInt64Array(B);
      const obs = new Float32Array(B * D);
      const nextObs = new Float32Array(B * D);
      const a = new Int32Array(B * 3);
      const ret = new Float32Array(B);
      const disc = new Float32Array(B);
      const w = new Float32Array(B);
      expect(l.fh_trainer_replay_sample(h, B, 7, beta, slot, nextSlot, obs, a, ret, disc, nextObs, w)).toBe(FhStatus.OK);

      const W = cfg.env.window;
      const F = pm.nFeatures;
      const obsOf = (s: number): Float32Array => {
        const o = new Float32Array(D);
        const t = bar[s] as number;
        o.set(pm.features.subarray((t - W + 1) * F, (t + 1) * F), 0);
        o.set(account.subarray(8 * s, 8 * s + 8), W * F);
        return o;
      };
      let total = 0;
      let size = 0;
      for (const x of leaf) if (x > 0) { total += x; size++; }
      const raw = Array.from(slot, (s) => Math.pow(size * ((leaf[Number(s)] as number) / total), -f(beta)));
      const maxRaw = Math.max(...raw);
      let ended = 0;
      let wrapped = 0;
      for (let j = 0; j < B; j++) {
        const s = Number(slot[j]);
        const row = Math.floor(s / N);
        const e = s % N;
        expect(leaf[s]).toBeGreaterThan(0);
        let acc = f(0);
        let g = f(1);
        for (let k = 0; k < n; k++) {
          const sk = ((row + k) % rows) * N + e;
          if (row + k >= rows) wrapped++;
          acc = f(acc + f(g * (reward[sk] as number)));
          g = f(g * gamma);
          if (done[sk]) {
            g = 0;
            ended++;
            break;
          }
        }
        expect(ret[j], `ret of slot ${s}`).toBe(acc);
        expect(disc[j], `disc of slot ${s}`).toBe(g);
        const ns = ((row + n) % rows) * N + e;
        expect(Number(nextSlot[j])).toBe(ns);
        for (let d = 0; d < 3; d++) expect(a[3 * j + d]).toBe(act[3 * s + d]);
        expect(firstMismatch(obs.subarray(j * D, (j + 1) * D), obsOf(s)), `obs of slot ${s}`).toBeNull();
        expect(firstMismatch(nextObs.subarray(j * D, (j + 1) * D), obsOf(ns)), `next obs of slot ${s}`).toBeNull();
        expect(w[j]).toBeCloseTo((raw[j] as number) / maxRaw, 5);
      }
      // the batch exercised episode ends inside the n steps and the ring's wrap-around
      expect(ended).toBeGreaterThan(0);
      expect(wrapped).toBeGreaterThan(0);
      // leaves differ after training (priority updates), so the weights are not all 1
      expect(Math.min(...w)).toBeLessThan(0.99);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });
});
