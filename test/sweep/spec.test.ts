// Sweep spec validation (errors name the key path), sampler determinism and coverage.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FoxhuntError } from '../../src/errors.js';
import { gridValues, radicalInverse, sampleSpace } from '../../src/sweep/sampler.js';
import type { Params } from '../../src/sweep/sampler.js';
import { ashaRungs, loadSweepSpec, parseSweepSpec, planTrials } from '../../src/sweep/spec.js';
import type { Dimension } from '../../src/sweep/spec.js';

const dir = mkdtempSync(join(tmpdir(), 'fh-spec-'));
const minimal = { max_epochs: 4, trials: 3, space: { 'agent.lr': { kind: 'uniform', low: 1e-4, high: 1e-3 } } };

function errorOf(input: unknown): FoxhuntError {
  try {
    parseSweepSpec(input, 'spec.toml', dir);
  } catch (err) {
    expect(err).toBeInstanceOf(FoxhuntError);
    return err as FoxhuntError;
  }
  throw new Error('expected the spec to be rejected');
}

function take(gen: Generator<Params>, n: number): Params[] {
  const out: Params[] = [];
  for (const p of gen) { if (out.length >= n) break; out.push(p); }
  return out;
}

describe('sweep spec', () => {
  it('loads the example and plans 12 distinct valid trials', () => {
    const spec = loadSweepSpec('config/sweeps/example.toml');
    expect(spec.rungs).toEqual([1, 3]);
    const trials = planTrials(spec);
    expect(trials).toHaveLength(12);
    expect(new Set(trials.map((t) => t.configHash)).size).toBe(12);
    for (const t of trials) {
      expect(t.config.train.steps_per_epoch).toBe(32);
      expect(t.config.env.n_envs).toBe(64); // from the tiny base
      expect(t.config.agent.lr).toBe(t.params['agent.lr']);
    }
  });

  it.each([
    [{ ...minimal, space: { 'agent.lr': { kind: 'uniform', low: 1, high: 0.5 } } }, 'space["agent.lr"].high'],
    [{ ...minimal, space: { 'agent.lr': { kind: 'gaussian', low: 1, high: 2 } } }, 'space["agent.lr"].kind'],
    [{ ...minimal, space: { 'agent.lrate': { kind: 'uniform', low: 1, high: 2 } } }, 'space["agent.lrate"]'],
    [{ ...minimal, asha: { eta: 1 } }, 'asha.eta'],
    [{ ...minimal, asha: { grace: 1 } }, 'asha.grace'],
    [{ ...minimal, max_epochs: 0 }, 'max_epochs'],
    [{ ...minimal, trials: undefined }, 'trials'],
    [{ ...minimal, sampler: { kind: 'grid' } }, 'space["agent.lr"].points'],
    [{ ...minimal, metric: 'Sharpe!' }, 'metric'],
    [{ ...minimal, space: { 'agent.gamma': { kind: 'choice', values: [] } } }, 'space["agent.gamma"].values'],
  ])('rejects %j naming %s', (input, where) => {
    const err = errorOf(input);
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.where).toBe(where);
    expect(err.message).toContain(where);
  });

  it('names the config key when a sampled value is out of range for the run config', () => {
    const spec = parseSweepSpec({ ...minimal, space: { 'agent.gamma': { kind: 'uniform', low: 0.5, high: 1.5 } } }, 's', dir);
    expect(() => planTrials(spec)).toThrow(/agent\.gamma/);
  });

  it('names file:line on TOML syntax errors and reads JSON specs', () => {
    const bad = join(dir, 'bad.toml');
    writeFileSync(bad, 'max_epochs = 3\ntrials = = 2\n');
    expect(() => loadSweepSpec(bad)).toThrow(`${bad}:2`);
    const json = join(dir, 'ok.json');
    writeFileSync(json, JSON.stringify(minimal));
    expect(loadSweepSpec(json).trials).toBe(3);
  });

  it('computes rungs grace * eta^k below max epochs', () => {
    expect(ashaRungs(1, 3, 9)).toEqual([1, 3]);
    expect(ashaRungs(1, 3, 10)).toEqual([1, 3, 9]);
    expect(ashaRungs(2, 2, 20)).toEqual([2, 4, 8, 16]);
    expect(ashaRungs(5, 3, 5)).toEqual([]);
  });

  it('deduplicates trials by config hash', () => {
    const spec = parseSweepSpec({ ...minimal, trials: 10, space: { 'agent.gamma': { kind: 'choice', values: [0.9, 0.99] } } }, 's', dir);
    const trials = planTrials(spec);
    expect(trials.map((t) => t.params['agent.gamma']).sort()).toEqual([0.9, 0.99]);
  });
});

describe('samplers', () => {
  const space: Record<string, Dimension> = {
    'agent.lr': { kind: 'log_uniform', low: 1e-5, high: 1e-2 },
    'agent.gamma': { kind: 'choice', values: [0.9, 0.95, 0.99] },
    'agent.hidden1': { kind: 'int', low: 8, high: 15 },
    'env.window': { kind: 'grid', values: [4, 8] },
  };

  it('is deterministic per seed and differs across seeds', () => {
    for (const kind of ['random', 'halton'] as const) {
      const a = take(sampleSpace(space, { kind, seed: 3 }), 20);
      expect(take(sampleSpace(space, { kind, seed: 3 }), 20)).toEqual(a);
      expect(take(sampleSpace(space, { kind, seed: 4 }), 20)).not.toEqual(a);
    }
  });

  it('stays inside every domain and covers it', () => {
    for (const kind of ['random', 'halton'] as const) {
      const pts = take(sampleSpace(space, { kind, seed: 1 }), 300);
      const lr = pts.map((p) => p['agent.lr'] as number);
      expect(Math.min(...lr)).toBeGreaterThanOrEqual(1e-5);
      expect(Math.max(...lr)).toBeLessThan(1e-2);
      // log-uniform: about a third of the points in each decade
      const decades = [0, 0, 0];
      for (const x of lr) decades[Math.min(2, Math.floor(Math.log10(x) + 5))]! += 1;
      for (const d of decades) expect(d).toBeGreaterThan(kind === 'halton' ? 90 : 70);
      expect(new Set(pts.map((p) => p['agent.gamma']))).toEqual(new Set([0.9, 0.95, 0.99]));
      expect(new Set(pts.map((p) => p['agent.hidden1']))).toEqual(new Set([8, 9, 10, 11, 12, 13, 14, 15]));
      expect(pts.map((p) => p['env.window']).slice(0, 4)).toEqual([4, 8, 4, 8]);
    }
  });

  it('halton is more even than random on a 1-d uniform (low discrepancy)', () => {
    const dim: Record<string, Dimension> = { 'agent.tau': { kind: 'uniform', low: 0, high: 1 } };
    const worstBinError = (kind: 'random' | 'halton'): number => {
      const bins = new Array<number>(16).fill(0);
      for (const p of take(sampleSpace(dim, { kind, seed: 9 }), 256)) bins[Math.floor((p['agent.tau'] as number) * 16)]! += 1;
      return Math.max(...bins.map((b) => Math.abs(b - 16)));
    };
    expect(worstBinError('halton')).toBeLessThanOrEqual(1);
    expect(worstBinError('random')).toBeGreaterThan(1);
    expect(radicalInverse(1, 2)).toBe(0.5);
    expect(radicalInverse(3, 2)).toBe(0.75);
  });

  it('grid enumerates the full cartesian product exactly once', () => {
    const g: Record<string, Dimension> = {
      a: { kind: 'choice', values: ['x', 'y'] },
      b: { kind: 'uniform', low: 0, high: 1, points: 3 },
      c: { kind: 'int', low: 1, high: 2 },
    };
    expect(gridValues(g['b'] as Dimension)).toEqual([0, 0.5, 1]);
    const pts = [...sampleSpace(g, { kind: 'grid', seed: 0 })];
    expect(pts).toHaveLength(12);
    expect(new Set(pts.map((p) => JSON.stringify(p))).size).toBe(12);
  });
});

describe('foxhunt sweep --dry-run', () => {
  it('fails with the key path of a bad spec and a non-zero exit', async () => {
    const { execFile } = await import('node:child_process');
    const bad = join(dir, 'cli-bad.toml');
    writeFileSync(bad, 'max_epochs = 3\ntrials = 2\n[space."agent.lr"]\nkind = "uniform"\nlow = 1\nhigh = 0.5\n');
    const res = await new Promise<{ code: number | null; stderr: string }>((done) => {
      const p = execFile(process.execPath, ['bin/foxhunt.js', 'sweep', bad, '--dry-run'], (err, _out, stderr) => done({ code: err ? (err as { code?: number }).code ?? 1 : 0, stderr }));
      p.stdin?.end();
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('space["agent.lr"].high');
    expect(res.stderr).toContain('high must be greater than low');
  });
});
