/**
 * compute-sanitizer on a small config (npm run test:gpu, on a GPU host): the native check driver
 * (test/gpu/native_check.cpp, `small` mode: two graph epochs of a small C51 config and one eager
 * Huber epoch on the CUDA library) under memcheck (every kernel, cuBLASLt's included) and racecheck
 * (shared-memory hazards in this project's kernels; the racecheck run does its GEMMs with the project's
 * reference kernel instead of cuBLASLt, filters to the project's kernels so that it finishes in minutes,
 * and uses the per-step evaluation). Both must report zero and the run must pass its checks.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, test } from 'vitest';
import { BUILD, driver } from './driver.js';

// Kernels of this project (kernels/*.cu, the reference GEMM fh_gemm_ref_kernel included): racecheck
// instruments these. An alternation, so a regular expression: --kernel-name's kns= key is a plain substring
// (kns=fh_|env_|... matches no kernel, and racecheck then checks nothing); its regex= key takes this.
const OUR_KERNELS = 'fh_|env_|eval_|per_|replay_|tree_|leaves_|collect_';

function sanitize(tool: string, extra: string[], env: Record<string, string> = {}): { status: number | null; out: string } {
  const r = spawnSync('compute-sanitizer', ['--tool', tool, '--error-exitcode', '9', ...extra, driver(), 'small', BUILD],
    { encoding: 'utf8', timeout: 420_000, maxBuffer: 64 << 20, env: { ...process.env, ...env } });
  if (r.error) throw new Error(`compute-sanitizer ${tool}: ${r.error.message} (is it on PATH?)`);
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

describe('compute-sanitizer, small config', () => {
  test('memcheck: no errors', () => {
    // the target cache on (its fills and the loss's reads through the batch's s' slots): the small config's
    // cost test alone would leave it off
    const { status, out } = sanitize('memcheck', [], { FH_TARGET_CACHE: '1' });
    const tail = out.slice(-3000);
    expect(out, tail).toMatch(/ERROR SUMMARY: 0 errors/);
    expect(out, tail).not.toMatch(/^FAIL/m);
    expect(status, tail).toBe(0);
  });

  test('racecheck: no hazards in the project\'s kernels', () => {
    // Filter by kernel name where this compute-sanitizer has the option (else every kernel, slower):
    // --kernel-name (regex= key), or the older --kernel-regex (kns=) where only that one exists.
    const help = `${spawnSync('compute-sanitizer', ['--help'], { encoding: 'utf8' }).stdout}`;
    const filter = help.includes('--kernel-name') ? ['--kernel-name', `regex=${OUR_KERNELS}`]
      : help.includes('--kernel-regex') ? ['--kernel-regex', `kns=${OUR_KERNELS}`] : [];
    // The fused evaluation is a thread-block-cluster kernel (distributed shared memory, cluster
    // barriers), like cuBLASLt's Hopper kernels below: the racecheck run uses the per-step evaluation
    // (FH_EVAL_FUSED=0); memcheck above covers the fused kernel. cuBLASLt's Hopper kernels
    // (thread-block clusters, TMA) break racecheck even when the kernel filter leaves them out (a
    // sanitizer hardware exception, then a failed cublasLtMatmul): the GEMMs run the project's reference
    // kernel instead (FH_GEMM_REFERENCE=1), which racecheck then checks too (most of the run's time:
    // about 3 minutes on the H200).
    const { status, out } = sanitize('racecheck', filter, { FH_EVAL_FUSED: '0', FH_GEMM_REFERENCE: '1' });
    const tail = out.slice(-3000);
    expect(out, tail).toMatch(/RACECHECK SUMMARY: 0 hazards displayed/);
    expect(out, tail).not.toMatch(/^FAIL/m);
    expect(status, tail).toBe(0);
  });
});
