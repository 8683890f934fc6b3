/**
 * Where the native trainer libraries live. `native/build/` of this checkout by default, or the
 * directory named by `FOXHUNT_NATIVE_DIR` (or an explicit `libDir`). No koffi here: this module
 * only answers "which file", so it is cheap to import anywhere.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export type NativeBackend = 'cpu' | 'cuda';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The directory holding libfoxhunt_*.so: `libDir`, else `$FOXHUNT_NATIVE_DIR`, else `native/build`. */
export function nativeDir(libDir?: string): string {
  if (libDir !== undefined && libDir !== '') return resolve(libDir);
  const fromEnv = process.env['FOXHUNT_NATIVE_DIR'];
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv);
  return join(repoRoot, 'native', 'build');
}

export function libraryFileName(backend: NativeBackend): string {
  return backend === 'cuda' ? 'libfoxhunt_cuda.so' : 'libfoxhunt_cpu.so';
}

export function libraryPath(backend: NativeBackend, libDir?: string): string {
  return join(nativeDir(libDir), libraryFileName(backend));
}

export function libraryExists(backend: NativeBackend, libDir?: string): boolean {
  return existsSync(libraryPath(backend, libDir));
}
