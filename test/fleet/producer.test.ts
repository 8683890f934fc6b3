/**
 * The producer's queue commands through the real `foxhunt` CLI: enqueue (new run, continue a run,
 * --follow), runs, show --json, cancel, export; clear errors for bad input and unreachable Redis.
 * Also the worker's health server.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CheckpointStore } from '../../src/redis/checkpoints.js';
import { RunStore } from '../../src/redis/runs.js';
import { ROOT, TINY, deterministic, fleetEnv, referenceScalars, startWorker, tinyConfig } from './helpers.js';
import type { FleetEnv } from './helpers.js';

let env: FleetEnv;
afterEach(async () => env.cleanup());

function foxhunt(e: FleetEnv, args: string[], extra: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin', 'foxhunt.js'), ...args], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: e.url, FOXHUNT_PREFIX: e.prefix, FOXHUNT_EPOCHS_QUEUE: e.queueName, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    p.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    p.on('exit', (code) => resolve({ code: code ?? -1, out, err }));
  });
}

describe('foxhunt queue commands', () => {
  it('enqueue, runs, cancel without a worker; clear errors for bad input and unreachable Redis', async () => {
    env = fleetEnv();
    const down = await foxhunt(env, ['runs'], { REDIS_URL: 'redis://:hunter2@127.0.0.1:1' });
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
    expect(down.err).not.toContain('hunter2');

    const bad = await foxhunt(env, ['enqueue', '--config', TINY, '--epochs', '2', '--set', 'agent.lr="fast"']);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/agent\.lr/);

    const ok = await foxhunt(env, ['enqueue', '--config', TINY, '--epochs', '3', '--run-id', 'cli1']);
    expect(ok.code).toBe(0);
    expect(ok.out.trim()).toBe('cli1');
    expect(await env.queue.getWaitingCount()).toBe(1);
    const again = await foxhunt(env, ['enqueue', '--config', TINY, '--epochs', '3', '--run-id', 'cli1']);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/already exists/);

    const runs = await foxhunt(env, ['runs', '--json']);
    const list = JSON.parse(runs.out) as { runId: string; status: string; targetEpochs: number }[];
    expect(list.map((r) => [r.runId, r.status, r.targetEpochs])).toEqual([['cli1', 'queued', 3]]);

    const cancel = await foxhunt(env, ['cancel', 'cli1']);
    expect(cancel.code).toBe(0);
    expect(cancel.out).toMatch(/queued job removed/);
    expect(await env.queue.getWaitingCount()).toBe(0);
    expect((await new RunStore(env.redis, env.keys).require('cli1')).status).toBe('cancelled');

    const missing = await foxhunt(env, ['show', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/no run nope/);
  });

  it('enqueue --follow, continue with --run, show --json and export; health endpoints answer', async () => {
    env = fleetEnv();
    const w = startWorker(env, {}, ['--cpu', '--health-port', '0', '--health-host', '127.0.0.1']);
    const line = await w.waitFor(/health server listening/);
    const port = (JSON.parse(line) as { port: number }).port;
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    await w.waitFor(/worker ready/);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    const first = await foxhunt(env, ['enqueue', '--config', TINY, '--epochs', '2', '--run-id', 'cli2', '--follow']);
    expect(first.code).toBe(0);
    expect(first.out.trim().split('\n'), `stdout:\n${first.out}\nstderr:\n${first.err}`).toHaveLength(3); // header + 2 epochs
    expect(first.err).toMatch(/run cli2: completed at epoch 2/);

    const more = await foxhunt(env, ['enqueue', '--run', 'cli2', '--epochs', '3', '--follow']);
    expect(more.code).toBe(0);
    expect(more.err).toMatch(/epochs 3\.\.3/);
    expect(more.out.trim().split('\n'), `stdout:\n${more.out}\nstderr:\n${more.err}`).toHaveLength(4);

    const show = await foxhunt(env, ['show', 'cli2', '--json']);
    const shown = JSON.parse(show.out) as { run: { status: string }; epochs: { epoch: number; scalars: Record<string, number | null> }[] };
    expect(shown.run.status).toBe('completed');
    expect(shown.epochs.map((e) => e.epoch)).toEqual([1, 2, 3]);
    const reference = await referenceScalars(tinyConfig(), 3, env.cacheDir, env.dataRoot);
    expect(shown.epochs.map((e) => deterministic(e.scalars))).toEqual(reference);

    const out = join(env.cacheDir, 'cli2-e2.ckpt');
    const exp = await foxhunt(env, ['export', 'cli2', '--epoch', '2', '--out', out]);
    expect(exp.code).toBe(0);
    const meta = await new CheckpointStore(env.redis, env.keys).meta('cli2', 2);
    expect(createHash('sha256').update(readFileSync(out)).digest('hex')).toBe(meta?.sha256);
    const gone = await foxhunt(env, ['export', 'cli2', '--epoch', '9', '--out', out]);
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/no checkpoint of epoch 9 \(retained: 1, 2, 3\)/);
  });
});
