/**
 * The native check driver (test/gpu/native_check.cpp) for the GPU suites that run it as a child
 * process: built with g++ on first use (or when its source is newer than the binary).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { FhEpochStats } from '../../src/native/binding.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BUILD = join(ROOT, 'native', 'build');
const DRIVER = join(BUILD, 'native_check');
const SOURCE = join(ROOT, 'test', 'gpu', 'native_check.cpp');

export function driver(): string {
  if (!existsSync(DRIVER) || statSync(DRIVER).mtimeMs < statSync(SOURCE).mtimeMs) {
    const r = spawnSync('g++', ['-O2', '-std=c++17', `-I${join(ROOT, 'native', 'include')}`, SOURCE, '-ldl', '-o', DRIVER],
      { encoding: 'utf8' });
    expect(r.status, `g++ native_check: ${r.stderr}`).toBe(0);
  }
  return DRIVER;
}

/** Two trainers' epochs of an A/B (a GPU path against its switch-off twin, with lr so small that both train on
 *  nearly the same batches): the same env steps, finite losses, and mean losses within `rel` of each other. */
export function expectEpochLossesClose(on: FhEpochStats[], off: FhEpochStats[], rel: number): void {
  expect(on.length).toBe(off.length);
  for (let e = 0; e < on.length; e++) {
    const a = on[e];
    const b = off[e];
    if (a === undefined || b === undefined) throw new Error('missing epoch');
    expect(a.env_steps).toBe(b.env_steps);
    expect(Number.isFinite(a.loss_mean)).toBe(true);
    expect(Math.abs(a.loss_mean - b.loss_mean), `epoch ${e + 1} loss`).toBeLessThanOrEqual(rel * Math.abs(b.loss_mean));
  }
}
