/**
 * The sandboxed trainer: a child process that owns one NativeTrainer. A native crash or CUDA fault
 * kills only this process; the worker fails (and retries) the job and lives on. The child ignores
 * SIGINT/SIGTERM (the worker decides when to stop, at an epoch boundary) and exits when the IPC
 * channel closes, so it never outlives its worker.
 *
 * Test-only fault hook: when FOXHUNT_TEST_FAULTS_FILE names a file holding a count n > 0, the next
 * trainer this process creates decrements it and is created with the native `fault_hook`, so the
 * native library itself crashes the process (SIGSEGV) in its first run_epoch.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseRunConfig } from '../src/config/load.js';
import { FoxhuntError, errorCodeOf } from '../src/errors.js';
import { NativeTrainer } from '../src/native/trainer.js';
import { flattenScalars } from '../src/trainer/scalars.js';
import { loadPrepareMarket, resolveRun, runEnvironment, stderrLogger } from '../src/trainer/local.js';
import type { ChildMessage, ParentMessage } from './protocol.js';

const log = stderrLogger().child({ component: 'trainer-child', pid: process.pid });
let trainer: NativeTrainer | null = null;
let tmpDir = '';

function send(msg: ChildMessage): void {
  process.send?.(msg);
}

/** Whether this trainer is to crash natively (test fault hook); consumes one fault when it is. */
function takeFault(): boolean {
  const file = process.env['FOXHUNT_TEST_FAULTS_FILE'];
  if (file === undefined || file === '') return false;
  let n = 0;
  try {
    n = Number(readFileSync(file, 'utf8').trim()) || 0;
  } catch {
    return false;
  }
  if (n <= 0) return false;
  writeFileSync(file, String(n - 1));
  log.warn('test fault hook: the native trainer will crash this process in its first epoch');
  return true;
}

async function handle(msg: ParentMessage): Promise<void> {
  switch (msg.type) {
    case 'init': {
      tmpDir = msg.tmpDir;
      const { cfg, backend } = resolveRun(parseRunConfig(msg.config, 'job'), { backend: msg.backend });
      const env = runEnvironment();
      const market = await (await loadPrepareMarket())(cfg, { dataRoot: env.dataRoot, cacheDir: env.cacheDir, log });
      trainer = await NativeTrainer.create(cfg, market, { backend, nativeFaultHook: takeFault() });
      if (msg.checkpointPath !== null) await trainer.loadCheckpoint(await readFile(msg.checkpointPath));
      const info = trainer.info();
      send({
        type: 'ready',
        info: { backend: info.backend, deviceName: info.deviceName, libSha256: info.libSha256, engine: info.engine, batchSize: info.batchSize, configHash: String(info.configHash) },
      });
      return;
    }
    case 'epoch': {
      if (trainer === null) throw new FoxhuntError('INTERNAL', 'epoch requested before init');
      const stats = await trainer.runEpoch();
      const buf = await trainer.saveCheckpoint();
      const path = join(tmpDir, `epoch-${stats.epoch}.ckpt`);
      await writeFile(path, buf);
      send({ type: 'epoch', epoch: stats.epoch, scalars: flattenScalars(stats), checkpointPath: path, checkpointBytes: buf.length });
      return;
    }
    case 'precompute': {
      const { cfg } = resolveRun(parseRunConfig(msg.config, 'job'), { backend: 'cpu' });
      const env = runEnvironment();
      const market = await (await loadPrepareMarket())(cfg, { dataRoot: env.dataRoot, cacheDir: env.cacheDir, log });
      send({ type: 'precomputed', cacheKey: market.cacheKey, cacheHit: market.cacheHit, bars: market.bars.close.length });
      return;
    }
    case 'close': {
      trainer?.close();
      trainer = null;
      process.disconnect?.();
      return;
    }
  }
}

process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
process.on('disconnect', () => {
  trainer?.close();
  process.exit(0);
});

let chain: Promise<void> = Promise.resolve();
process.on('message', (raw) => {
  const msg = raw as ParentMessage;
  chain = chain.then(() => handle(msg)).catch((err: unknown) => {
    const where = err instanceof FoxhuntError ? err.where ?? null : null;
    send({ type: 'error', code: errorCodeOf(err), message: err instanceof Error ? err.message : String(err), where });
  });
});
