import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CONFIG_DIR, configHash, loadRunConfig, parseRunConfig, parseSetValue, resolveGpuProfile } from '../../src/config/load.js';
import { defaultRunConfig, RunConfigSchema } from '../../src/config/schema.js';
import { FoxhuntError } from '../../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'fh-cfg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const runs = (name: string): string => join(CONFIG_DIR, 'runs', name);

function configError(fn: () => unknown): FoxhuntError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FoxhuntError);
    expect((err as FoxhuntError).code).toBe('CONFIG_INVALID');
    return err as FoxhuntError;
  }
  throw new Error('expected a CONFIG_INVALID error');
}

describe('run config', () => {
  it('defaults are the reference workload', () => {
    const c = defaultRunConfig();
    expect(c.env).toMatchObject({ n_envs: 4096, episode_len: 100, window: 64, branch_sizes: [3, 4, 3] });
    expect(c.agent).toMatchObject({ hidden1: 512, hidden2: 256, head_hidden: 128, atoms: 51, lr: 1e-4, adam_eps: 1.5e-4 });
    expect(c.replay.capacity).toBe(2 ** 21);
    expect(c.train).toMatchObject({ steps_per_epoch: 341, batch_size: 0, batch_cap: 16384 });
    expect(c.instrument).toMatchObject({ point_value: 50, tick_size: 0.25, commission: 2.25, slippage_ticks: 1 });
    expect(c.data.synthetic).toMatchObject({ days: 504, bars_per_day: 1380 });
  });

  it('every field has a one-line description', () => {
    const missing: string[] = [];
    const leaves: string[] = [];
    const walk = (schema: z.ZodType, path: string): void => {
      let s: z.ZodType = schema;
      // unwrap defaults/prefaults/optionals/pipes to the object, keeping the outer description
      for (;;) {
        const def = (s as unknown as { def: { type: string; innerType?: z.ZodType; in?: z.ZodType } }).def;
        if (def.innerType) s = def.innerType;
        else if (def.type === 'pipe' && def.in) s = def.in;
        else break;
      }
      if (s instanceof z.ZodObject) {
        for (const [k, v] of Object.entries(s.shape as Record<string, z.ZodType>)) {
          const p = path ? `${path}.${k}` : k;
          const desc = v.description;
          const isLeaf = !(v instanceof z.ZodObject) && !((v as unknown as { def: { innerType?: z.ZodType } }).def.innerType instanceof z.ZodObject);
          if (isLeaf) leaves.push(p);
          if (!(v instanceof z.ZodObject) && !(desc && !desc.includes('\n'))) {
            if (!((v as unknown as { def: { innerType?: z.ZodType } }).def.innerType instanceof z.ZodObject)) missing.push(p);
          }
          walk(v, p);
        }
      }
    };
    walk(RunConfigSchema, '');
    expect(missing).toEqual([]);
    expect(leaves).toContain('agent.lr');
    expect(leaves).toContain('data.synthetic.market');
    expect(leaves.length).toBeGreaterThanOrEqual(68);
  });

  it('loads tiny and reference; tiny is small', () => {
    const tiny = loadRunConfig(runs('tiny.toml'));
    expect(tiny.env.n_envs).toBe(64);
    expect(tiny.agent.atoms).toBe(1);
    expect(tiny.data.synthetic.market).toBe('edge');
    const ref = loadRunConfig(runs('reference.toml'));
    expect(ref.env.window * 16 + 8).toBe(1032);
    expect(ref.split.val_fraction).toBe(0.2);
  });

  it('applies --set overrides as TOML literals', () => {
    const c = loadRunConfig(runs('tiny.toml'), ['agent.lr=3e-4', 'env.branch_sizes=[5, 2, 2]', 'env.flatten_at_session_break=false',
      'instrument.symbol=NQ', 'data.synthetic.market="null"', 'seed=7']);
    expect(c.agent.lr).toBe(3e-4);
    expect(c.env.branch_sizes).toEqual([5, 2, 2]);
    expect(c.env.flatten_at_session_break).toBe(false);
    expect(c.instrument.symbol).toBe('NQ');
    expect(c.data.synthetic.market).toBe('null');
    expect(c.seed).toBe(7);
    expect(parseSetValue('1_000')).toBe(1000);
    expect(parseSetValue('hello world')).toBe('hello world');
  });

  it('an unknown key fails with its path and value', () => {
    const e = configError(() => loadRunConfig(runs('tiny.toml'), ['agent.lrr=3']));
    expect(e.where).toBe('agent.lrr');
    expect(e.message).toMatch(/agent\.lrr = 3: unknown key/);
  });

  it('a wrong type or range fails with the path, the value and what was expected', () => {
    let e = configError(() => loadRunConfig(undefined, ['env.n_envs=-4']));
    expect(e.where).toBe('env.n_envs');
    expect(e.message).toMatch(/env\.n_envs = -4: .*expected number to be >0/);
    e = configError(() => loadRunConfig(undefined, ['gpu.backend=metal']));
    expect(e.message).toMatch(/gpu\.backend = "metal": .*expected one of "auto"\|"cpu"\|"cuda"/);
    e = configError(() => loadRunConfig(undefined, ['env.branch_sizes=[4,4,3]']));
    expect(e.message).toMatch(/env\.branch_sizes = \[4,4,3\]: direction branch size must be odd/);
    e = configError(() => parseRunConfig({ agent: { v_min: 5, v_max: 1 } }));
    expect(e.where).toBe('agent.v_max');
  });

  it('a TOML syntax error names file:line', () => {
    const f = join(dir, 'bad.toml');
    writeFileSync(f, 'seed = 1\n[env]\nn_envs = = 3\n');
    const e = configError(() => loadRunConfig(f));
    expect(e.where).toBe(`${f}:3`);
  });

  it('the hash is canonical: key order does not matter, values do', () => {
    const a = parseRunConfig({ seed: 3, env: { n_envs: 8, window: 4 } });
    const b = parseRunConfig({ env: { window: 4, n_envs: 8 }, seed: 3 });
    expect(configHash(a)).toBe(configHash(b));
    expect(configHash(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(configHash(parseRunConfig({ seed: 4, env: { n_envs: 8, window: 4 } }))).not.toBe(configHash(a));
  });

  it('resolves GPU profiles', () => {
    const base = loadRunConfig(runs('reference.toml'));
    const cpu = resolveGpuProfile(base);
    expect(cpu.gpu.profile).toBe('cpu');
    expect(cpu.gpu.backend).toBe('cpu');
    expect(cpu.train.batch_cap).toBe(256);
    const h200 = resolveGpuProfile(base, { deviceName: 'NVIDIA H200' });
    expect(h200.gpu.profile).toBe('h200');
    expect(h200.train.batch_size).toBe(0);
    expect(h200.gpu.backend).toBe('cuda');
    expect(resolveGpuProfile(base, { deviceName: 'NVIDIA H100 80GB HBM3' }).gpu.profile).toBe('h100');
  });

  it('keeps a run\'s own non-default [train]/[gpu] values over the GPU profile', () => {
    const set = loadRunConfig(runs('reference.toml'), ['train.batch_size=8192', 'gpu.graphs=false', 'train.batch_cap=4096']);
    const h200 = resolveGpuProfile(set, { deviceName: 'NVIDIA H200' });
    expect(h200.train.batch_size).toBe(8192);
    expect(h200.train.batch_cap).toBe(4096);
    expect(h200.gpu.graphs).toBe(false);
    expect(h200.gpu.backend).toBe('cuda');
    const cpu = resolveGpuProfile(set);
    expect(cpu.train.batch_cap).toBe(4096);
    expect(cpu.gpu.backend).toBe('cpu');
  });
});
