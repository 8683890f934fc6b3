#!/usr/bin/env node
// Builds the native trainer with CMake into native/build.
//   always: libfoxhunt_cpu.so (CPU backend, g++ only)
//   when nvcc is found: the kernel objects (compile check), and libfoxhunt_cuda.so when cuBLAS is found too
// Flags: --quiet-if-fresh (print only on failure), --require-cuda (fail unless the CUDA backend was built)
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const quiet = args.has('--quiet-if-fresh');
const requireCuda = args.has('--require-cuda');
const src = join(root, 'native');
const build = join(root, 'native', 'build');

if (!existsSync(join(src, 'CMakeLists.txt'))) {
  console.error('build-native: native/CMakeLists.txt not found; nothing to build');
  process.exit(requireCuda ? 1 : 0);
}
const cmake = spawnSync('cmake', ['--version'], { encoding: 'utf8' });
if (cmake.status !== 0) {
  console.error('build-native: cmake is required (apt-get install cmake g++)');
  process.exit(1);
}
function run(argv) {
  const r = spawnSync('cmake', argv, { cwd: root, encoding: 'utf8', stdio: quiet ? 'pipe' : 'inherit' });
  if (r.status !== 0) {
    if (quiet) process.stderr.write((r.stdout ?? '') + (r.stderr ?? ''));
    console.error(`build-native: cmake ${argv.join(' ')} failed`);
    process.exit(r.status ?? 1);
  }
}
const jobs = process.env.FOXHUNT_BUILD_JOBS ?? '2';
// Kernels are built for Hopper (sm_90) unless FOXHUNT_CUDA_ARCH names others (e.g. "90;100"); passed on
// every configure so that a cache made with nvcc's own default (sm_75) cannot linger.
const cudaArch = process.env['FOXHUNT_CUDA_ARCH'] || '90';
run(['-S', src, '-B', build, '-DCMAKE_BUILD_TYPE=Release', `-DCMAKE_CUDA_ARCHITECTURES=${cudaArch}`]);
run(['--build', build, '-j', jobs]);
if (requireCuda && !existsSync(join(build, 'libfoxhunt_cuda.so'))) {
  console.error('build-native: --require-cuda given but libfoxhunt_cuda.so was not built (need nvcc and cuBLAS)');
  process.exit(1);
}
if (!quiet) console.log('build-native: done');
