/**
 * The CUDA environment against the CPU backend (npm run test:gpu, on a GPU host): the same seed and
 * the same random actions give identical trajectories, bit for bit — rewards, dones, positions,
 * cursors, equity, costs after every step (episode ends and Philox resets included) and the (N, D)
 * observations. Both backends run env.cuh; the CUDA build compiles it with -fmad=false.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { NativeLib, TrainerHandle } from '../../src/native/binding.js';
import type { VecStepOutputs } from '../../src/env/reference.js';
import { create, info, market, nativeConfig, nativeMarket, rng, tinyConfig } from '../native/helpers.js';

/** What fh_trainer_env_step writes: the reference's step outputs less the realised PnL. */
type StepOut = Omit<VecStepOutputs, 'pnl'>;

function step(l: NativeLib, h: TrainerHandle, n: number, actions: Int32Array): StepOut {
  const o: StepOut = {
    reward: new Float32Array(n).fill(NaN),
    done: new Uint8Array(n).fill(7),
    position: new Int32Array(n).fill(-999),
    cursor: new BigInt64Array(n).fill(-1n),
    equity: new Float64Array(n).fill(NaN),
    cost: new Float64Array(n).fill(NaN),
  };
  const s = l.fh_trainer_env_step(h, actions, o.reward, o.done, o.position, o.cursor, o.equity, o.cost);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_env_step: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return o;
}

function observe(l: NativeLib, h: TrainerHandle, n: number, d: number): Float32Array {
  const out = new Float32Array(n * d).fill(NaN);
  const s = l.fh_trainer_env_observe(h, out);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_env_observe: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return out;
}

/** Bytes equal (so -0 vs 0 and NaN payloads count, as "bit for bit" means). */
function sameBits(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

describe('CUDA env vs the CPU backend', () => {
  for (const seed of [1, 77]) {
    test(`seed ${seed}: 400 random-action steps identical, observations identical`, () => {
      const cfg = tinyConfig([`seed=${seed}`, 'env.flatten_at_session_break=true', 'env.risk_penalty=0.05']);
      const m = nativeMarket(market(cfg));
      const cpu = loadNative('cpu');
      const gpu = loadNative('cuda');
      const hc = create(cpu, nativeConfig(cfg), m);
      const hg = create(gpu, nativeConfig(cfg, { backend: 1, use_graphs: 0 }), m);
      try {
        const n = cfg.env.n_envs;
        const d = info(cpu, hc).obs_dim;
        expect(info(gpu, hg).obs_dim).toBe(d);
        expect(sameBits(observe(gpu, hg, n, d), observe(cpu, hc, n, d))).toBe(true);
        const sizes = cfg.env.branch_sizes;
        const r = rng(seed * 1000 + 3);
        let dones = 0;
        let stopsOrTrades = 0;
        for (let k = 0; k < 400; k++) {
          const actions = Int32Array.from({ length: 3 * n }, (_, i) => Math.floor(r() * (sizes[i % 3] as number)));
          const a = step(cpu, hc, n, actions);
          const b = step(gpu, hg, n, actions);
          for (const key of ['reward', 'done', 'position', 'cursor', 'equity', 'cost'] as const) {
            if (!sameBits(b[key], a[key])) throw new Error(`step ${k}: ${key} differs between CUDA and CPU`);
          }
          for (let e = 0; e < n; e++) {
            dones += a.done[e] as number;
            if ((a.cost[e] as number) > 0) stopsOrTrades++;
          }
          if (k % 40 === 0 && !sameBits(observe(gpu, hg, n, d), observe(cpu, hc, n, d))) {
            throw new Error(`step ${k}: observations differ between CUDA and CPU`);
          }
        }
        // the run exercised episode ends (and so Philox resets) and trading costs
        expect(dones).toBeGreaterThan(n);
        expect(stopsOrTrades).toBeGreaterThan(100);
        expect(sameBits(observe(gpu, hg, n, d), observe(cpu, hc, n, d))).toBe(true);
      } finally {
        cpu.fh_trainer_destroy(hc);
        gpu.fh_trainer_destroy(hg);
      }
    });
  }
});
