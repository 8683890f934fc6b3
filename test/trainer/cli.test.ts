/** End-to-end: `foxhunt train --json` and `npm run bench -- --json` on the tiny config. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const cacheDir = mkdtempSync(join(tmpdir(), 'foxhunt-cli-'));
const env = { ...process.env, FOXHUNT_CACHE_DIR: cacheDir, FOXHUNT_LOG_LEVEL: 'warn' };

afterAll(() => rmSync(cacheDir, { recursive: true, force: true }));

describe('CLI', () => {
  it('foxhunt train --json prints one JSON row per epoch', async () => {
    const { stdout } = await run(process.execPath,
      ['bin/foxhunt.js', 'train', '--config', 'config/runs/tiny.toml', '--epochs', '2', '--json', '--set', 'gpu.threads=1'], { env, timeout: 120_000 });
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    const rows = lines.map((l) => JSON.parse(l) as Record<string, number | null>);
    expect(rows.map((r) => r['epoch'])).toEqual([1, 2]);
    expect(rows[1]?.['step/env']).toBe(2 * (rows[0]?.['step/env'] ?? Number.NaN));
    expect(Object.keys(rows[0] ?? {})).toContain('val/sharpe');
  }, 150_000);

  it('foxhunt train prints a table and rejects a bad --set with the field', async () => {
    const { stdout } = await run(process.execPath,
      ['bin/foxhunt.js', 'train', '--config', 'config/runs/tiny.toml', '--epochs', '1', '--backend', 'cpu', '--set', 'gpu.threads=1'], { env, timeout: 120_000 });
    expect(stdout).toMatch(/epoch\s+loss/);
    expect(stdout.trim().split('\n').at(-1)?.trim()).toMatch(/^1\s/);
    const bad = run(process.execPath,
      ['bin/foxhunt.js', 'train', '--config', 'config/runs/tiny.toml', '--epochs', '1', '--set', 'env.n_envs=-3'], { env, timeout: 60_000 });
    await expect(bad).rejects.toMatchObject({ stderr: expect.stringMatching(/env\.n_envs/) });
  }, 150_000);

  it('npm run bench -- --config tiny --backend cpu --json ends with the result object', async () => {
    const { stdout, stderr } = await run('npm', ['run', 'bench', '--', '--config', 'tiny', '--backend', 'cpu', '--json', '--epochs', '2', '--warmup', '1', '--set', 'gpu.threads=1'],
      { env, timeout: 120_000 });
    const last = stdout.trim().split('\n').at(-1) ?? '';
    expect(last, `stdout:\n${stdout}\nstderr:\n${stderr}`).toMatch(/^\{.*\}$/);
    const r = JSON.parse(last) as Record<string, unknown>;
    for (const k of ['backend', 'device', 'config', 'epoch_ms', 'collect_ms', 'train_ms', 'eval_ms', 'env_steps_per_s',
      'samples_per_s', 'host_syncs_per_epoch', 'batch_size', 'epochs', 'tflops_achieved', 'floor_ms']) {
      expect(r, k).toHaveProperty(k);
    }
    expect(r['backend']).toBe('cpu');
    expect(r['engine']).toBe('cpu fp32, 1 thread');
    expect(r['config']).toBe('tiny');
    expect(r['epochs']).toBe(2);
    expect(r['host_syncs_per_epoch']).toBe(0);
    expect(r['batch_size']).toBe(64);
    expect(r['floor_ms']).toBeNull();
    const epochMs = r['epoch_ms'] as number;
    expect(epochMs).toBeGreaterThan(0);
    expect(epochMs, last).toBeGreaterThanOrEqual((r['collect_ms'] as number) + (r['train_ms'] as number) - 1e-3);
    expect(r['env_steps_per_s'] as number).toBeGreaterThan(0);
  }, 150_000);
});
