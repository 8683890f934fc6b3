import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../src/config/load.js';
import { loadMarketBars } from '../../src/data/source.js';
import { prepareMarket } from '../../src/features/prepare.js';

const FIX = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'data');
const root = mkdtempSync(join(tmpdir(), 'fh-src-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A generic CSV of `sessions` sessions of `perSession` one-minute bars from `day0`, price drifting from px. */
function writeContract(name: string, day0: number, sessions: number, perSession: number, px: number, volume: number): void {
  const rows = ['time,open,high,low,close,volume'];
  let p = px;
  for (let d = 0; d < sessions; d++) {
    for (let m = 0; m < perSession; m++) {
      const t = Date.UTC(2024, 0, 1 + day0 + d, 14, 30 + m);
      const c = p + ((m * 7 + d) % 5 - 2) * 0.25;
      rows.push(`${new Date(t).toISOString()},${p},${Math.max(p, c) + 0.25},${Math.min(p, c) - 0.25},${c},${volume}`);
      p = c;
    }
  }
  writeFileSync(join(root, name), rows.join('\n') + '\n');
}

describe('file data sources', () => {
  it('stitches data.paths back-adjusted, with the roll as a session start, and prepares features', () => {
    writeContract('ESH4.csv', 0, 20, 30, 5000, 100);
    writeContract('ESM4.csv', 15, 20, 30, 5020, 200); // overlaps 5 sessions, more volume
    const cfg = parseRunConfig({
      data: { source: 'csv', paths: ['ESH4.csv', 'ESM4.csv'] },
      split: { embargo_bars: 30, val_fraction: 0.2 },
      env: { window: 4 },
    });
    const { bars } = loadMarketBars(cfg, root);
    expect(bars.close.length).toBe(15 * 30 + 20 * 30);
    let sessions = 0;
    for (const s of bars.sessionStart) sessions += s;
    expect(sessions).toBe(35);
    const pm = prepareMarket(cfg, { dataRoot: root });
    expect(pm.features.length).toBe(bars.close.length * 16);
    expect(pm.features.every((v) => Number.isFinite(v))).toBe(true);
    expect(pm.bars.sessionStart[pm.split.valBegin]).toBe(1);
  });

  it('loads a single file by format and confines paths to the data root', () => {
    copyFileSync(join(FIX, 'ninjatrader_ok.txt'), join(root, 'nt.txt'));
    const cfg = parseRunConfig({ data: { source: 'ninjatrader', path: 'nt.txt' } });
    expect(loadMarketBars(cfg, root).bars.close.length).toBe(3);
    const escape = parseRunConfig({ data: { source: 'csv', path: '../../etc/passwd' } });
    expect(() => loadMarketBars(escape, root)).toThrow(expect.objectContaining({ code: 'PATH_OUTSIDE_DATA_ROOT' }));
    expect(() => parseRunConfig({ data: { source: 'csv' } })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', where: 'data.path' }));
  });
});
