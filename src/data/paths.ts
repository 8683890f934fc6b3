/**
 * Data paths are confined to a data root: job data and configs name files relative to it, and
 * nothing may escape it (`..`, absolute paths elsewhere, symlinks pointing out).
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { FoxhuntError } from '../errors.js';

function inside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep)[0] !== '..');
}

function realOrSelf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * The absolute path of `p` (relative to `root`, or absolute inside it). Throws
 * PATH_OUTSIDE_DATA_ROOT when it (or the file a symlink points to) lies outside the root.
 */
export function resolvePathInDataRoot(root: string, p: string): string {
  if (p.includes('\0')) throw new FoxhuntError('PATH_OUTSIDE_DATA_ROOT', 'path contains a NUL byte', { where: 'data.path' });
  const absRoot = resolve(root);
  const abs = resolve(absRoot, p);
  if (!inside(absRoot, abs)) {
    throw new FoxhuntError('PATH_OUTSIDE_DATA_ROOT', `${JSON.stringify(p)} is outside the data root ${absRoot}`, { where: 'data.path' });
  }
  const realRoot = realOrSelf(absRoot);
  const real = realOrSelf(abs);
  if (!inside(realRoot, real)) {
    throw new FoxhuntError('PATH_OUTSIDE_DATA_ROOT', `${JSON.stringify(p)} resolves (through a link) outside the data root ${absRoot}`, { where: 'data.path' });
  }
  return abs;
}
