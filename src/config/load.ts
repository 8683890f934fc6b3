/**
 * Loading a run config: TOML file → `--set a.b=value` overrides → zod validation → RunConfig.
 * Errors are FoxhuntError('CONFIG_INVALID') naming the key path, the value and what was expected.
 * Also: the canonical config hash and the GPU profile overlay (config/gpu/<profile>.toml).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseToml } from 'smol-toml';
import type { z } from 'zod';
import { FoxhuntError } from '../errors.js';
import { GpuSchema, RunConfigSchema, TrainSchema } from './schema.js';
import type { RunConfig } from './schema.js';

type Table = Record<string, unknown>;

/** Repository `config/` directory. */
export const CONFIG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'config');

function isTable(v: unknown): v is Table {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = root;
  for (const k of path) {
    if (isTable(cur) || Array.isArray(cur)) cur = (cur as Record<PropertyKey, unknown>)[k];
    else return undefined;
  }
  return cur;
}

function show(v: unknown): string {
  if (v === undefined) return '(missing)';
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** Turn a zod error into one readable CONFIG_INVALID error (all issues, one per line). */
export function configErrorFrom(err: z.ZodError, input: unknown, source: string): FoxhuntError {
  const lines: string[] = [];
  let first = '';
  for (const issue of err.issues) {
    const path = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const p = path ? `${path}.${key}` : key;
        if (!first) first = p;
        lines.push(`${p} = ${show(valueAt(input, [...issue.path, key]))}: unknown key (expected one of the fields of ${path || 'the top level'})`);
      }
      continue;
    }
    if (!first) first = path || '(root)';
    lines.push(`${path || '(root)'} = ${show(valueAt(input, issue.path))}: ${issue.message}`);
  }
  return new FoxhuntError('CONFIG_INVALID', `invalid config (${source}):\n  ${lines.join('\n  ')}`, { where: first });
}

/** Validate a plain object as a RunConfig (defaults filled in). */
export function parseRunConfig(input: unknown, source = 'config'): RunConfig {
  const r = RunConfigSchema.safeParse(input);
  if (!r.success) throw configErrorFrom(r.error, input, source);
  return r.data;
}

/** Parse the right side of `--set key=value` as a TOML literal; a bare word is a string. */
export function parseSetValue(text: string): unknown {
  const src = text.trim();
  try {
    const t = parseToml(`v = ${src}`);
    return t['v'];
  } catch {
    return src;
  }
}

/** Apply `a.b.c=value` overrides in place (creating tables as needed). */
export function applySets(table: Table, sets: readonly string[]): Table {
  for (const s of sets) {
    const eq = s.indexOf('=');
    if (eq <= 0) {
      throw new FoxhuntError('CONFIG_INVALID', `--set ${JSON.stringify(s)}: expected key.path=value`, { where: s });
    }
    const path = s.slice(0, eq).trim().split('.');
    if (path.some((p) => p === '' || p === '__proto__' || p === 'constructor' || p === 'prototype')) {
      throw new FoxhuntError('CONFIG_INVALID', `--set ${JSON.stringify(s)}: bad key path`, { where: s.slice(0, eq) });
    }
    let cur = table;
    for (const key of path.slice(0, -1)) {
      const next = cur[key];
      if (next === undefined) {
        const t: Table = {};
        cur[key] = t;
        cur = t;
      } else if (isTable(next)) {
        cur = next;
      } else {
        throw new FoxhuntError('CONFIG_INVALID', `--set ${s}: ${key} is not a table`, { where: path.join('.') });
      }
    }
    cur[path[path.length - 1] as string] = parseSetValue(s.slice(eq + 1));
  }
  return table;
}

/** Read a TOML file into a plain table; syntax errors name file:line. */
export function readToml(path: string): Table {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new FoxhuntError('CONFIG_INVALID', `cannot read config file: ${(err as Error).message}`, { where: path, cause: err });
  }
  try {
    return parseToml(text) as Table;
  } catch (err) {
    const e = err as { line?: number; message?: string };
    const where = e.line !== undefined ? `${path}:${e.line}` : path;
    throw new FoxhuntError('CONFIG_INVALID', `TOML syntax error: ${e.message ?? String(err)}`, { where, cause: err });
  }
}

/** Load a run config from TOML (or defaults when path is undefined), apply overrides, validate. */
export function loadRunConfig(path: string | undefined, sets: readonly string[] = []): RunConfig {
  const table = path !== undefined ? readToml(path) : {};
  applySets(table, sets);
  return parseRunConfig(table, path ?? 'defaults');
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (isTable(v)) {
    const out: Table = {};
    for (const k of Object.keys(v).sort()) {
      if (v[k] !== undefined) out[k] = canonical(v[k]);
    }
    return out;
  }
  return v;
}

/** Canonical JSON (sorted keys, no undefined) of a value. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(canonical(v));
}

/** sha256 (hex) of the canonical JSON of a validated config. */
export function configHash(cfg: RunConfig): string {
  return createHash('sha256').update(canonicalJson(cfg)).digest('hex');
}

/** Schema defaults of the sections a GPU profile may set. */
const SECTION_DEFAULTS: Record<'gpu' | 'train', Table> = { gpu: GpuSchema.parse({}) as Table, train: TrainSchema.parse({}) as Table };

export type GpuProfileName = 'cpu' | 'h100' | 'h200';

/** Which profile `auto` means on a device (by its name; no device or unknown → cpu or h100). */
export function pickGpuProfile(cfg: RunConfig, deviceName?: string): GpuProfileName {
  if (cfg.gpu.profile !== 'auto') return cfg.gpu.profile;
  if (cfg.gpu.backend === 'cpu' || deviceName === undefined || deviceName === '') return 'cpu';
  if (/h200/i.test(deviceName)) return 'h200';
  return 'h100';
}

/**
 * Overlay config/gpu/<profile>.toml ([gpu] and [train] tables only) on a config and revalidate.
 * The profile's values are the device's defaults: they replace the run's values that are still the
 * schema defaults, and a run's own non-default values win. `gpu.profile` becomes the resolved name.
 */
export function resolveGpuProfile(cfg: RunConfig, opts: { deviceName?: string; configDir?: string } = {}): RunConfig {
  const name = pickGpuProfile(cfg, opts.deviceName);
  const file = join(opts.configDir ?? CONFIG_DIR, 'gpu', `${name}.toml`);
  const profile = readToml(file);
  for (const key of Object.keys(profile)) {
    if (key !== 'gpu' && key !== 'train') {
      throw new FoxhuntError('CONFIG_INVALID', `a GPU profile may only set [gpu] and [train], not [${key}]`, { where: file });
    }
  }
  const merged = structuredClone(cfg) as unknown as Table;
  for (const section of ['gpu', 'train'] as const) {
    const over = profile[section];
    if (over === undefined) continue;
    if (!isTable(over)) throw new FoxhuntError('CONFIG_INVALID', `[${section}] must be a table`, { where: file });
    // A value the run set away from the schema default (e.g. --set train.batch_size=8192, or
    // gpu.graphs = false) is the user's choice and stays; the rest takes the device's value.
    const target = merged[section] as Table;
    const defaults = SECTION_DEFAULTS[section];
    for (const [k, v] of Object.entries(over)) {
      if (!(k in defaults) || canonicalJson(target[k]) === canonicalJson(defaults[k])) target[k] = v;
    }
  }
  (merged['gpu'] as Table)['profile'] = name;
  return parseRunConfig(merged, file);
}

/** A run config argument: an existing TOML path, or a name under config/runs/ ("tiny"). */
export function resolveRunConfigPath(nameOrPath: string, configDir: string = CONFIG_DIR): string {
  if (existsSync(nameOrPath)) return resolve(nameOrPath);
  const named = join(configDir, 'runs', nameOrPath.endsWith('.toml') ? nameOrPath : `${nameOrPath}.toml`);
  if (existsSync(named)) return named;
  throw new FoxhuntError('CONFIG_INVALID', `no such config file, nor config/runs/${nameOrPath}.toml`, { where: '--config' });
}
