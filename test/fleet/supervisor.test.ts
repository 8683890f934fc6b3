/**
 * `foxhunt-worker --gpus all`: one worker per GPU (two faked with FOXHUNT_TEST_GPUS, CPU backend),
 * a crashed worker is restarted for its GPU, SIGTERM stops them all and the supervisor exits 0.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { listWorkers } from '../../src/redis/workers.js';
import { fleetEnv, startWorker, waitUntil } from './helpers.js';
import type { FleetEnv } from './helpers.js';

let env: FleetEnv;
afterEach(async () => env.cleanup());

describe('foxhunt-worker --gpus all', () => {
  it('supervises one worker per GPU and restarts a crashed one', async () => {
    env = fleetEnv();
    const sup = startWorker(env, { FOXHUNT_TEST_GPUS: '2' }, ['--gpus', 'all', '--health-port', '-1']);
    const both = await waitUntil('two workers', async () => {
      const hb = await listWorkers(env.redis, env.keys);
      const byGpu = new Map(hb.map((h) => [h.gpuIndex, h]));
      return byGpu.has(0) && byGpu.has(1) ? byGpu : null;
    }, 60_000, 200);
    expect(both.get(1)?.gpuUuid).toBe('GPU-test-1');
    const victim = both.get(1)?.pid ?? 0;
    expect(victim).toBeGreaterThan(0);
    process.kill(victim, 'SIGKILL');
    await sup.waitFor(/worker died; restarting/, 10_000);
    const replaced = await waitUntil('a new worker on GPU 1', async () =>
      (await listWorkers(env.redis, env.keys)).find((h) => h.gpuIndex === 1 && h.pid !== victim), 60_000, 200);
    expect(replaced.pid).not.toBe(victim);
    expect(replaced.state).toBe('idle');

    sup.kill('SIGTERM');
    expect((await sup.exited).code).toBe(0);
    const pids = [both.get(0)?.pid ?? 0, replaced.pid];
    for (const pid of pids) {
      expect(() => process.kill(pid, 0)).toThrow();
    }
  });
});
