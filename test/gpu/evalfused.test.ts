/**
 * The fused evaluation (kernels/eval_fused.cu) against the cuBLASLt loop (npm run test:gpu, on a GPU
 * host), through the native check driver's `evalfused` mode: identical bf16 weights and market, the
 * small config (C51 and plain Q) and the reference shapes (D 1032, 512/256, four heads of 128, 51
 * atoms, 128 segments, and 101 like the reference run's, whose last tile leaves blocks without rows). It checks that
 * the fused path is used and deterministic, that the Q of the first step and of every step up to each segment's first
 * greedy flip agree (rel. L2 < 1e-2), that
 * every flip is a near-tie, that the metrics are identical when nothing flipped, and that the trainer
 * reports the matching path's metrics with FH_EVAL_FUSED=0 and =1. The check runs once per instance of the
 * kernel (its exchange between the cluster's blocks, its split of the head layers).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { BUILD, driver } from './driver.js';

describe('fused evaluation vs the cuBLASLt loop', () => {
  // Each instance of the kernel: the default (the st.async exchange, the layers split by units over the warps),
  // trunk 2 split by K (FH_EVAL_NSPLIT=1), every layer split by K (FH_EVAL_NSPLIT=0) and the stores and cluster
  // barriers (FH_EVAL_XASYNC=0).
  test.each([
    ['the default', {}],
    ['FH_EVAL_XASYNC=0', { FH_EVAL_XASYNC: '0' }],
    ['FH_EVAL_NSPLIT=1', { FH_EVAL_NSPLIT: '1' }],
    ['FH_EVAL_NSPLIT=0', { FH_EVAL_NSPLIT: '0' }],
  ])('small and reference shapes, %s: every check of native_check evalfused passes', (_name, extra) => {
    const r = spawnSync(driver(), ['evalfused', BUILD], {
      // a few seconds each; the limit ends a hung exchange (an mbarrier waiting for bytes that never come) early
      encoding: 'utf8', timeout: 150_000, maxBuffer: 64 << 20, env: { ...process.env, ...extra },
    });
    const out = `${r.stdout}\n${r.stderr}`;
    const tail = out.slice(-4000);
    expect(out, tail).not.toMatch(/^FAIL/m);
    // at least 6 checks per configuration (7 when no segment flipped) and 2 trainer checks per small one
    const passed = (out.match(/^PASS/gm) ?? []).length;
    expect(passed, tail).toBeGreaterThanOrEqual(22);
    expect(out, tail).toMatch(/\[reference\] fused evaluation runs and is used/);
    expect(r.status, tail).toBe(0);
  });
});
