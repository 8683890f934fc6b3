/**
 * Bad input returns a status and a message naming the problem, and never crashes the process:
 * zero and huge sizes, NaN features, a window longer than the data, bad splits, bad arguments to
 * the narrow entry points, divergence, and checkpoints that are truncated, corrupt, of another
 * version or of another config. A failed load leaves the trainer's state untouched.
 * The test-only fault hook crashes a child process (SIGSEGV), never this one.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import type { FhConfig, FhEpochStats, FhMarket } from '../../src/native/binding.js';
import { create, info, lib, market, nativeConfig, nativeMarket, saveCheckpoint, tinyConfig, tryCreate } from './helpers.js';

const small = ['env.n_envs=16', 'env.episode_len=10', 'train.steps_per_epoch=5', 'train.batch_size=16', 'replay.capacity=1024',
  'agent.hidden1=16', 'agent.hidden2=16', 'agent.head_hidden=8'];

describe('native bad input', () => {
  const cfg = tinyConfig(small);
  const pm = market(cfg);
  const m = nativeMarket(pm);
  const base = nativeConfig(cfg);

  test.each<[string, Partial<FhConfig>, number, RegExp]>([
    ['zero envs', { n_envs: 0 }, FhStatus.ERR_INVALID_CONFIG, /n_envs/],
    ['huge envs', { n_envs: 2 ** 30 }, FhStatus.ERR_INVALID_CONFIG, /n_envs/],
    ['zero hidden width', { hidden1: 0 }, FhStatus.ERR_INVALID_CONFIG, /hidden1/],
    ['negative batch', { batch_size: -1 }, FhStatus.ERR_INVALID_CONFIG, /batch_size/],
    ['even direction branch', { branch_sizes: [4, 4, 3] }, FhStatus.ERR_INVALID_CONFIG, /branch_sizes\[0\]/],
    ['NaN learning rate', { lr: NaN }, FhStatus.ERR_INVALID_CONFIG, /lr/],
    ['replay smaller than n-step rows', { replay_capacity: 16 }, FhStatus.ERR_INVALID_CONFIG, /replay_capacity/],
    ['replay too large for the host', { replay_capacity: 2 ** 31, n_envs: 1 }, FhStatus.ERR_OUT_OF_MEMORY, /host memory/],
    ['CUDA requested from the CPU library', { backend: 1 }, FhStatus.ERR_UNSUPPORTED, /backend/],
  ])('%s', (_name, over, status, msg) => {
    const r = tryCreate(lib(), { ...base, ...over }, m);
    expect(r.status).toBe(status);
    expect(r.handle).toBeNull();
    expect(r.error).toMatch(msg);
    // fh_validate_config agrees on config errors
    if (status === FhStatus.ERR_INVALID_CONFIG) {
      const err = Buffer.alloc(256);
      expect(lib().fh_validate_config({ ...base, ...over }, err, err.length)).toBe(status);
    }
  });

  test.each<[string, (mk: FhMarket) => FhMarket, RegExp]>([
    ['NaN in features', (mk) => {
      const f = Float32Array.from(mk.features);
      f[1000 * pm.nFeatures + 3] = NaN;
      return { ...mk, features: f };
    }, /features: non-finite value at bar 1000 feature 3/],
    ['zero ATR', (mk) => {
      const a = Float64Array.from(mk.atr);
      a[77] = 0;
      return { ...mk, atr: a };
    }, /atr.*bar 77/],
    ['window longer than the train range', (mk) => ({ ...mk, train_begin: 0, train_end: cfg.env.window }), /window/],
    ['validation range reaching past the data', (mk) => ({ ...mk, val_end: mk.n_bars + 1 }), /val/],
    ['empty train range', (mk) => ({ ...mk, train_begin: 100, train_end: 100 }), /train/],
    ['zero features', (mk) => ({ ...mk, n_features: 0 }), /n_features/],
  ])('%s', (_name, edit, msg) => {
    const r = tryCreate(lib(), base, edit(m));
    expect(r.status).toBe(FhStatus.ERR_INVALID_DATA);
    expect(r.error).toMatch(msg);
  });

  test('narrow entry points reject bad arguments with a message', () => {
    const l = lib();
    const h = create(l, base, m);
    try {
      const N = cfg.env.n_envs;
      const act = new Int32Array(N * 3);
      act[5] = 3; // stop branch has 3 choices: 0..2
      expect(l.fh_trainer_env_step(h, act, null, null, null, null, null, null)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_last_error(h)).toMatch(/actions\[1\]\[2\] = 3/);
      const P = Number(info(l, h).n_params);
      expect(l.fh_trainer_get_params(h, 0, new Float32Array(P - 1), P - 1)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_get_params(h, 2, new Float32Array(P), P)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      const bad = new Float32Array(P);
      bad[3] = Infinity;
      expect(l.fh_trainer_set_params(h, 0, bad, P)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_last_error(h)).toMatch(/NaN or Inf/);
      const D = info(l, h).obs_dim;
      const obs = new Float32Array(D);
      obs[2] = NaN;
      expect(l.fh_trainer_q_values(h, 1, obs, new Float32Array(10))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_q_values(h, 0, obs, new Float32Array(10))).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      const one = new Float32Array(1);
      const loss: [number] = [0];
      expect(l.fh_trainer_loss_grad(h, 0, obs, new Int32Array(3), one, one, obs, one, loss, null, null)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_loss_grad(h, 1, obs, new Int32Array(3), one, one, obs, one, loss, null, null)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
      expect(l.fh_trainer_last_error(h)).toMatch(/NaN or Inf/);
      const small2 = Buffer.alloc(10);
      const written: [number] = [0];
      expect(l.fh_trainer_save_checkpoint(h, small2, small2.length, written)).toBe(FhStatus.ERR_BUFFER_TOO_SMALL);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('a diverging network gives FH_ERR_DIVERGED naming the epoch', () => {
    const l = lib();
    const h = create(l, base, m);
    try {
      const P = Number(info(l, h).n_params);
      expect(l.fh_trainer_set_params(h, 0, new Float32Array(P).fill(1e30), P)).toBe(FhStatus.OK);
      const out: Partial<FhEpochStats> = {};
      expect(l.fh_trainer_run_epoch(h, out)).toBe(FhStatus.ERR_DIVERGED);
      expect(l.fh_trainer_last_error(h)).toMatch(/epoch 1: the (loss|gradient norm) became (NaN|Inf)/);
    } finally {
      l.fh_trainer_destroy(h);
    }
  });

  test('bad checkpoints are refused before any state changes', () => {
    const l = lib();
    const h = create(l, base, m);
    const other = create(l, nativeConfig(tinyConfig([...small, 'agent.hidden1=24'])), m);
    try {
      const out: Partial<FhEpochStats> = {};
      expect(l.fh_trainer_run_epoch(h, out)).toBe(FhStatus.OK);
      const good = saveCheckpoint(l, h);
      const cases: Array<[string, Buffer, RegExp]> = [];
      cases.push(['truncated', good.subarray(0, good.length - 1), /truncated/]);
      cases.push(['header only', good.subarray(0, 40), /truncated/]);
      const flipped = Buffer.from(good);
      const mid = Math.floor(flipped.length / 2);
      flipped[mid] = (flipped[mid] as number) ^ 0x10;
      cases.push(['flipped byte', flipped, /sha256/]);
      const version = Buffer.from(good);
      version.writeUInt32LE(99, 4);
      cases.push(['wrong version', version, /version 99/]);
      const magic = Buffer.from(good);
      magic.write('XXXX', 0);
      cases.push(['bad magic', magic, /magic/]);
      const before = saveCheckpoint(l, h);
      for (const [name, buf, msg] of cases) {
        expect(l.fh_trainer_load_checkpoint(h, buf, buf.length), name).toBe(FhStatus.ERR_CHECKPOINT);
        expect(l.fh_trainer_last_error(h), name).toMatch(msg);
      }
      // another config (different network): the config hash does not match
      expect(l.fh_trainer_load_checkpoint(other, good, good.length)).toBe(FhStatus.ERR_CHECKPOINT);
      expect(l.fh_trainer_last_error(other)).toMatch(/config hash/);
      // nothing changed, and the good checkpoint still loads
      expect(saveCheckpoint(l, h).equals(before)).toBe(true);
      expect(l.fh_trainer_load_checkpoint(h, good, good.length)).toBe(FhStatus.OK);
    } finally {
      l.fh_trainer_destroy(h);
      l.fh_trainer_destroy(other);
    }
  });

  test('fault_hook = 1 crashes the (child) process in run_epoch', () => {
    const code = `
      import * as H from ${JSON.stringify(new URL('./helpers.ts', import.meta.url).pathname)};
      const cfg = H.tinyConfig(${JSON.stringify(small)});
      const l = H.lib();
      const h = H.create(l, { ...H.nativeConfig(cfg), fault_hook: 1 }, H.nativeMarket(H.market(cfg)));
      H.runEpoch(l, h);
      console.log('survived');
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stdout).not.toMatch(/survived/);
    expect(r.signal, `exit status ${String(r.status)}, ${String(r.error)}, stderr:\n${r.stderr}`).toBe('SIGSEGV');
  });
});
