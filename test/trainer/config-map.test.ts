/**
 * toNativeConfig maps every RunConfig field of DESIGN §2 onto fh_config 1:1: each schema leaf is
 * either mapped or declared host-only, every fh_config member is produced, and changing a mapped
 * field changes exactly its fh_config member.
 */
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { defaultRunConfig, RunConfigSchema } from '../../src/config/schema.js';
import type { RunConfig } from '../../src/config/schema.js';
import { structMembers } from '../../src/native/binding.js';
import { FIXED_NATIVE_FIELDS, HOST_ONLY_FIELDS, NATIVE_FIELD_MAP, toNativeConfig } from '../../src/native/trainer.js';

interface Def { type: string; innerType?: z.ZodType; shape?: Record<string, z.ZodType> }

function unwrap(schema: z.ZodType): z.ZodType {
  let cur = schema;
  for (;;) {
    const def = (cur as unknown as { def: Def }).def;
    if ((def.type === 'default' || def.type === 'prefault' || def.type === 'optional') && def.innerType !== undefined) cur = def.innerType;
    else return cur;
  }
}

/** Every leaf path of the RunConfig schema (tables recursed, tuples and arrays are leaves). */
function leafPaths(schema: z.ZodType, prefix = ''): string[] {
  const inner = unwrap(schema) as unknown as { def: Def; shape?: Record<string, z.ZodType> };
  if (inner.def.type !== 'object' || inner.shape === undefined) return [prefix];
  return Object.entries(inner.shape).flatMap(([k, v]) => leafPaths(v, prefix === '' ? k : `${prefix}.${k}`));
}

function setAt(cfg: RunConfig, path: string, value: unknown): void {
  const keys = path.split('.');
  let cur = cfg as unknown as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) cur = cur[k] as Record<string, unknown>;
  cur[keys[keys.length - 1] as string] = value;
}

function getAt(cfg: RunConfig, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], cfg);
}

describe('toNativeConfig', () => {
  const leaves = leafPaths(RunConfigSchema);

  it('knows every RunConfig field: mapped to fh_config or host-only, never both', () => {
    expect(leaves.length).toBeGreaterThan(60);
    const mapped = new Set(NATIVE_FIELD_MAP.map((m) => m.path));
    const hostOnly = new Set(HOST_ONLY_FIELDS);
    const unknown = leaves.filter((p) => !mapped.has(p) && !hostOnly.has(p));
    expect(unknown, 'RunConfig fields neither mapped nor declared host-only').toEqual([]);
    expect([...mapped].filter((p) => hostOnly.has(p))).toEqual([]);
    expect([...mapped, ...hostOnly].filter((p) => !leaves.includes(p)), 'stale paths').toEqual([]);
  });

  it('sets every fh_config member, and only those', () => {
    const native = toNativeConfig(defaultRunConfig());
    expect(Object.keys(native).sort()).toEqual([...structMembers('fh_config')].sort());
    const targets = NATIVE_FIELD_MAP.map((m) => m.field);
    expect(new Set(targets).size).toBe(targets.length);
    expect([...targets, ...FIXED_NATIVE_FIELDS].sort()).toEqual([...structMembers('fh_config')].sort());
  });

  it('maps the reference defaults and the fixed members', () => {
    const n = toNativeConfig(defaultRunConfig());
    expect(n).toMatchObject({
      seed: 1, backend: 0, n_branches: 3, fault_hook: 0, n_envs: 4096, episode_len: 100, window: 64,
      branch_sizes: [3, 4, 3], point_value: 50, tick_size: 0.25, commission: 2.25, slippage_ticks: 1, max_contracts: 1,
      flatten_at_session_break: 1, use_graphs: 1, deterministic: 0, hidden1: 512, hidden2: 256, head_hidden: 128,
      atoms: 51, v_min: -10, v_max: 10, gamma: 0.99, n_step: 3, lr: 1e-4, replay_capacity: 2097152, per_alpha: 0.6,
      per_beta_steps: 100000, train_steps: 341, batch_size: 0, batch_cap: 16384, eps_decay_steps: 2000000, eval_segments: 64,
    });
    expect(toNativeConfig(defaultRunConfig(), 'cuda').backend).toBe(1);
  });

  it.each(NATIVE_FIELD_MAP.map((m) => [m.path, m.field] as const))('%s changes exactly fh_config.%s', (path, field) => {
    const base = defaultRunConfig();
    const before = toNativeConfig(base) as unknown as Record<string, unknown>;
    const cfg = structuredClone(base);
    const v = getAt(cfg, path);
    let changed: unknown;
    if (typeof v === 'boolean') changed = !v;
    else if (Array.isArray(v)) changed = v.map((x: number, i: number) => x + 2 * (i + 1));
    else if (typeof v === 'number') changed = v * 1.5 + 0.3;
    else throw new Error(`unexpected value at ${path}: ${String(v)}`);
    setAt(cfg, path, changed);
    const after = toNativeConfig(cfg) as unknown as Record<string, unknown>;
    const diff = Object.keys(after).filter((k) => JSON.stringify(after[k]) !== JSON.stringify(before[k]));
    expect(diff).toEqual([field]);
    expect(after[field]).toEqual(typeof changed === 'boolean' ? (changed ? 1 : 0) : changed);
  });

  it('rejects a non-finite value naming the config path', () => {
    const cfg = defaultRunConfig();
    cfg.agent.lr = Number.NaN;
    expect(() => toNativeConfig(cfg)).toThrow(/agent\.lr/);
  });
});
