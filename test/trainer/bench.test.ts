/** The bench driver's pure parts: config names, medians, the peak rate and the table. */
import { describe, expect, it } from 'vitest';
import { formatBench, H200_BF16_TFLOPS, median, peakTflopsFor, resolveConfigPath } from '../../bench/bench.js';
import type { BenchResult } from '../../bench/bench.js';
import type { TrainerInfo } from '../../src/native/trainer.js';

function info(backend: 'cpu' | 'cuda', deviceName: string): TrainerInfo {
  return {
    backend, device: 0, batchSize: 64, obsDim: 136, nParams: 1000, replayCapacity: 65536, flopsPerEpoch: 1e9, rewardScale: 1,
    configHash: '0'.repeat(16), deviceName, deviceUuid: '', deviceMemTotal: 0, deviceMemFree: 0, engine: backend, libSha256: 'a'.repeat(64),
    libVersion: '0.1.0', libPath: '/x',
  };
}

function result(over: Partial<BenchResult>): BenchResult {
  return {
    backend: 'cuda', device: 'NVIDIA H200', config: 'reference', config_path: 'config/runs/reference.toml', batch_size: 16384,
    n_envs: 4096, episode_len: 100, train_steps: 341, obs_dim: 1032, n_params: 867264, warmup: 2, epochs: 5, epoch_ms: 420,
    collect_ms: 7.8, train_ms: 317.6, eval_ms: 91.9, wall_epoch_ms: 420.5, env_steps_per_s: 52.6e6, samples_per_s: 17.6e6,
    host_syncs_per_epoch: 1, gflop_per_epoch: 43453, tflops_achieved: 103.5, gflops_achieved: 103500, peak_tflops: 790,
    peak_source: 'test', floor_ms: 55, lib_sha256: 'b'.repeat(64), lib_version: '0.1.0 cuda', engine: 'cuda bf16, graphs, fused-epilogue backward', commit: 'abc', date: '2026-01-01', ...over,
  };
}

describe('bench driver', () => {
  it('resolves config names and paths', () => {
    expect(resolveConfigPath('tiny')).toMatch(/config\/runs\/tiny\.toml$/);
    expect(resolveConfigPath('config/runs/reference.toml')).toMatch(/reference\.toml$/);
    expect(() => resolveConfigPath('no-such-config')).toThrow(/no such config/);
  });

  it('takes medians of odd and even counts', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it('uses the H200 rate on H100/H200, none on CPU, and an override everywhere', () => {
    expect(peakTflopsFor(info('cuda', 'NVIDIA H200')).tflops).toBe(H200_BF16_TFLOPS);
    expect(peakTflopsFor(info('cuda', 'NVIDIA H100 80GB HBM3')).tflops).toBe(H200_BF16_TFLOPS);
    expect(peakTflopsFor(info('cuda', 'NVIDIA A10')).tflops).toBeNull();
    expect(peakTflopsFor(info('cpu', 'cpu (2 threads)')).tflops).toBeNull();
    expect(peakTflopsFor(info('cpu', 'cpu'), 0.5).tflops).toBe(0.5);
  });

  it('prints the SPEC 7 table with the floor ratio, and n/a without a peak', () => {
    const gpu = formatBench(result({}));
    expect(gpu).toMatch(/train ms\s+317\.60/);
    expect(gpu).toMatch(/host syncs\/epoch\s+1/);
    expect(gpu).toMatch(/achieved\s+103\.50 TFLOP\/s/);
    expect(gpu).toMatch(/floor\s+55\.00 ms at 790 TFLOP\/s .*epoch = 7\.6 x floor/);
    expect(gpu).toMatch(/device NVIDIA H200/);
    const tiny = formatBench(result({ floor_ms: 0.00158, epoch_ms: 131.26 }));
    expect(tiny).toMatch(/floor\s+0\.00158 ms/);
    const cpu = formatBench(result({ backend: 'cpu', device: 'cpu', peak_tflops: null, floor_ms: null, gflops_achieved: 5.19, tflops_achieved: 0.00519 }));
    expect(cpu).toMatch(/achieved\s+5\.19 GFLOP\/s/);
    expect(cpu).toMatch(/floor\s+n\/a/);
  });
});
