/**
 * The native check driver (test/gpu/native_check.cpp) for the GPU suites that run it as a child
 * process: built with g++ on first use (or when its source is newer than the binary).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';

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
