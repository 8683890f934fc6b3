/**
 * `foxhunt-worker --gpus all`: one worker process per visible GPU (`--gpu N`), each restarted
 * with backoff when it dies; SIGTERM/SIGINT are passed on and the supervisor exits when all have.
 * Health ports: worker on GPU i listens on P + i (P = --health-port, default 9464).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { GpuInfo } from './gpu.js';

const MAIN = join(dirname(fileURLToPath(import.meta.url)), 'main.ts');

export async function supervise(gpus: GpuInfo[], passArgs: string[], healthPort: number | null, log: Logger): Promise<number> {
  let stopping = false;
  const children = new Map<number, ChildProcess>();
  const restarts = new Map<number, number>();
  let resolveAll: (() => void) | null = null;
  const allDone = new Promise<void>((r) => { resolveAll = r; });

  const startOne = (gpu: GpuInfo): void => {
    const args = ['--import', 'tsx', MAIN, '--gpu', String(gpu.index), ...passArgs];
    args.push('--health-port', healthPort === null ? '-1' : healthPort === 0 ? '0' : String(healthPort + gpu.index));
    const child = spawn(process.execPath, args, { stdio: 'inherit', env: process.env });
    children.set(gpu.index, child);
    log.info({ gpu: gpu.index, pid: child.pid }, 'started worker');
    const startedAt = Date.now();
    child.on('exit', (code, signal) => {
      children.delete(gpu.index);
      if (stopping) {
        if (children.size === 0) resolveAll?.();
        return;
      }
      const n = Date.now() - startedAt > 60_000 ? 0 : (restarts.get(gpu.index) ?? 0) + 1;
      restarts.set(gpu.index, n);
      const delay = Math.min(60_000, 1000 * 2 ** Math.min(n, 6));
      log.error({ gpu: gpu.index, code, signal, restartInMs: delay }, 'worker died; restarting');
      setTimeout(() => { if (!stopping) startOne(gpu); }, delay);
    });
  };

  for (const gpu of gpus) startOne(gpu);
  const stop = (sig: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: sig }, 'stopping all workers');
    for (const c of children.values()) c.kill('SIGTERM');
    if (children.size === 0) resolveAll?.();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await allDone;
  return 0;
}
