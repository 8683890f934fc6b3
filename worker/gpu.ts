/**
 * Which GPUs this host has: `nvidia-smi` when it is installed, else the CUDA library's device
 * count, else none (the worker then runs the CPU backend). FOXHUNT_TEST_GPUS=n fakes n GPUs (tests).
 */
import { execFileSync } from 'node:child_process';
import { cudaDeviceCount } from '../src/native/trainer.js';

export interface GpuInfo {
  index: number;
  uuid: string;
  model: string;
  memMb: number | null;
  driver: string;
}

export function listGpus(): GpuInfo[] {
  // Test only: pretend to have n GPUs (the supervisor tests run on machines without one).
  const fake = Number(process.env['FOXHUNT_TEST_GPUS'] ?? '');
  if (Number.isInteger(fake) && fake > 0) {
    return Array.from({ length: fake }, (_, index) => ({ index, uuid: `GPU-test-${index}`, model: 'test GPU', memMb: 1024, driver: 'test' }));
  }
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=index,uuid,name,memory.total,driver_version', '--format=csv,noheader,nounits'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    return out.trim().split('\n').filter((l) => l.trim() !== '').map((line) => {
      const [index, uuid, model, mem, driver] = line.split(',').map((s) => s.trim());
      const memMb = Number(mem);
      return { index: Number(index), uuid: uuid ?? '', model: model ?? '', memMb: Number.isFinite(memMb) ? memMb : null, driver: driver ?? '' };
    });
  } catch {
    // no nvidia-smi: ask the CUDA library, if it is built
  }
  let n = 0;
  try {
    n = cudaDeviceCount();
  } catch {
    n = 0;
  }
  return Array.from({ length: n }, (_, index) => ({ index, uuid: '', model: '', memMb: null, driver: '' }));
}
