import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../src/config/load.js';
import { decodeFx, encodeFx, fxcachePath } from '../../src/features/fxcache.js';
import type { FxLogger } from '../../src/features/fxcache.js';
import { prepareMarket } from '../../src/features/prepare.js';

const dir = mkdtempSync(join(tmpdir(), 'fh-fxc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function recorder(): FxLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (_o, m) => lines.push(m), warn: (_o, m) => lines.push(`WARN ${m}`) };
}

const cfg = parseRunConfig({
  data: { synthetic: { market: 'edge', days: 8, bars_per_day: 390, seed: 5 } },
  split: { embargo_bars: 390 },
  env: { window: 8 },
});

describe('fxcache', () => {
  it('misses, then hits with identical features', () => {
    const cacheDir = join(dir, 'a');
    const log = recorder();
    const first = prepareMarket(cfg, { cacheDir, log });
    expect(first.cacheHit).toBe(false);
    const second = prepareMarket(cfg, { cacheDir, log });
    expect(second.cacheHit).toBe(true);
    expect(log.lines).toEqual(['fxcache miss', 'fxcache hit']);
    expect(second.cacheKey).toBe(first.cacheKey);
    expect(Buffer.from(second.features.buffer).equals(Buffer.from(first.features.buffer))).toBe(true);
    expect(second.featureNames).toEqual(first.featureNames);
    expect(second.nFeatures).toBe(16);
    expect(second.features.length).toBe(8 * 390 * 16);
    // atomic write: no temp file left behind
    expect(readdirSync(cacheDir)).toEqual([`${first.cacheKey}.fxc`]);
  });

  it('keys on the bars and the feature settings', () => {
    const cacheDir = join(dir, 'b');
    const a = prepareMarket(cfg, { cacheDir });
    const b = prepareMarket(parseRunConfig({ ...cfg, features: { ...cfg.features, norm_window: 1000 } }), { cacheDir });
    const c = prepareMarket(parseRunConfig({ ...cfg, data: { ...cfg.data, synthetic: { ...cfg.data.synthetic, seed: 6 } } }), { cacheDir });
    const d = prepareMarket(parseRunConfig({ ...cfg, features: { ...cfg.features, leak_canary: true } }), { cacheDir });
    expect(new Set([a.cacheKey, b.cacheKey, c.cacheKey, d.cacheKey]).size).toBe(4);
    expect(b.cacheHit || c.cacheHit || d.cacheHit).toBe(false);
  });

  it('detects a truncated file, warns and rebuilds it', () => {
    const cacheDir = join(dir, 'c');
    const first = prepareMarket(cfg, { cacheDir });
    const path = fxcachePath(cacheDir, first.cacheKey);
    truncateSync(path, 1000);
    const log = recorder();
    const again = prepareMarket(cfg, { cacheDir, log });
    expect(again.cacheHit).toBe(false);
    expect(log.lines).toEqual(['WARN fxcache corrupt, rebuilding']);
    expect(Buffer.from(again.features.buffer).equals(Buffer.from(first.features.buffer))).toBe(true);
    expect(prepareMarket(cfg, { cacheDir }).cacheHit).toBe(true);
  });

  it('detects a flipped payload byte', () => {
    const cacheDir = join(dir, 'd');
    const first = prepareMarket(cfg, { cacheDir });
    const path = fxcachePath(cacheDir, first.cacheKey);
    const buf = readFileSync(path);
    buf[buf.length - 100] = buf[buf.length - 100]! ^ 0x01;
    writeFileSync(path, buf);
    const log = recorder();
    expect(prepareMarket(cfg, { cacheDir, log }).cacheHit).toBe(false);
    expect(log.lines[0]).toBe('WARN fxcache corrupt, rebuilding');
  });

  it('decode checks magic, version and key', () => {
    const e = { key: 'k1', nBars: 2, nFeatures: 3, featureNames: ['a', 'b', 'c'], featureSet: 'v1', features: Float32Array.from([1, 2, 3, 4, 5, 6]) };
    const buf = encodeFx(e);
    const ok = decodeFx(buf, 'k1');
    expect(ok.status).toBe('hit');
    if (ok.status === 'hit') expect([...ok.entry.features]).toEqual([1, 2, 3, 4, 5, 6]);
    expect(decodeFx(buf, 'k2')).toMatchObject({ status: 'corrupt', reason: expect.stringMatching(/does not match/) });
    const badMagic = Buffer.from(buf);
    badMagic[0] = 0;
    expect(decodeFx(badMagic, 'k1')).toMatchObject({ status: 'corrupt', reason: 'bad magic' });
    const badVersion = Buffer.from(buf);
    badVersion.writeUInt32LE(99, 8);
    expect(decodeFx(badVersion, 'k1')).toMatchObject({ status: 'corrupt', reason: expect.stringMatching(/version 99/) });
    expect(decodeFx(buf.subarray(0, 10), 'k1').status).toBe('corrupt');
  });
});
