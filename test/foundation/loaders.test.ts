import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { FoxhuntError } from '../../src/errors.js';
import { loadBarsFile, sniffFormat } from '../../src/data/loaders.js';
import type { DataFormat } from '../../src/data/loaders.js';
import { parseTimestamp } from '../../src/data/builder.js';
import { resolvePathInDataRoot } from '../../src/data/paths.js';
import { stitchContracts } from '../../src/data/stitch.js';
import { allocBars, NS_PER_MINUTE } from '../../src/data/types.js';
import type { Bars } from '../../src/data/types.js';

const DATA = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'data');
const opts = { tickSize: 0.25, sessionGapMinutes: 30 };
const load = (name: string, format: DataFormat): Bars => loadBarsFile(join(DATA, name), format, opts);

function expectDataError(fn: () => unknown, where: string, reason: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(FoxhuntError);
  const e = caught as FoxhuntError;
  expect(e.code).toBe('DATA_INVALID');
  expect(e.where).toBe(where);
  expect(e.message).toMatch(reason);
}

const iso = (ts: bigint | undefined): string => new Date(Number((ts ?? 0n) / 1_000_000n)).toISOString();

describe('generic CSV', () => {
  it('loads bars, skips blank lines and flags the gap as a session start', () => {
    const b = load('generic_ok.csv', 'csv');
    expect(b.close.length).toBe(5);
    expect(iso(b.ts[0])).toBe('2024-03-04T14:30:00.000Z');
    expect([...b.close]).toEqual([5100.75, 5101.5, 5100.5, 5098.25, 5098.75]);
    expect([...b.sessionStart]).toEqual([1, 0, 0, 1, 0]);
    expect([...b.volume]).toEqual([1200, 900, 800, 1500, 700]);
  });

  it('reads case-insensitive headers in any order, semicolons, epoch ms', () => {
    const b = load('generic_epoch_ms.csv', 'csv');
    expect(b.close.length).toBe(2);
    expect(iso(b.ts[0])).toBe('2024-03-04T14:30:00.000Z');
    expect(b.ts[1]! - b.ts[0]!).toBe(NS_PER_MINUTE);
  });

  it('reads a UTF-8 BOM and CRLF line ends', () => {
    const b = load('generic_bom_crlf.csv', 'csv');
    expect(b.close.length).toBe(1);
    expect(iso(b.ts[0])).toBe('2024-03-04T14:30:00.000Z');
  });

  it('names the line of a bar whose high is below its close', () => {
    expectDataError(() => load('generic_bad_high.csv', 'csv'), `${join(DATA, 'generic_bad_high.csv')}:4`, /high 5101 is below max/);
  });
  it('names the line of a non-increasing time', () => {
    expectDataError(() => load('generic_bad_time.csv', 'csv'), `${join(DATA, 'generic_bad_time.csv')}:4`, /not after the previous bar/);
  });
  it('names the line of an off-grid price', () => {
    expectDataError(() => load('generic_bad_tick.csv', 'csv'), `${join(DATA, 'generic_bad_tick.csv')}:3`, /close 5101.4 is not on the tick grid/);
  });
  it('names the line of a non-number', () => {
    expectDataError(() => load('generic_bad_number.csv', 'csv'), `${join(DATA, 'generic_bad_number.csv')}:3`, /high "abc" is not a number/);
  });
  it('names the header when a column is missing', () => {
    expectDataError(() => load('generic_no_close.csv', 'csv'), `${join(DATA, 'generic_no_close.csv')}:1`, /lacks column\(s\) close/);
  });
});

describe('Databento ohlcv-1m', () => {
  it('decodes 1e-9 fixed-point prices, ns timestamps, missing minutes without rows', () => {
    const b = load('databento_ok.csv', 'databento');
    expect(b.close.length).toBe(4);
    expect([...b.open]).toEqual([5100, 5100.75, 5101.5, 5099]);
    expect(b.ts[2]! - b.ts[1]!).toBe(2n * NS_PER_MINUTE); // a missing minute: no row, no fill
    expect([...b.sessionStart]).toEqual([1, 0, 0, 1]);
    expect(b.symbol).toBe('ESH4');
    expect(sniffFormat(join(DATA, 'databento_ok.csv'))).toBe('databento');
  });
  it('names the line of a low above the open', () => {
    expectDataError(() => load('databento_bad_low.csv', 'databento'), `${join(DATA, 'databento_bad_low.csv')}:3`, /low 5101 is above min/);
  });
  it('rejects bars of another schema', () => {
    expectDataError(() => load('databento_1h.csv', 'databento'), `${join(DATA, 'databento_1h.csv')}:2`, /rtype "34" is not ohlcv-1m/);
  });
});

describe('NinjaTrader', () => {
  it('reads yyyyMMdd HHmmss;O;H;L;C;V, shifting close stamps to bar starts', () => {
    const b = load('ninjatrader_ok.txt', 'ninjatrader');
    expect(b.close.length).toBe(3);
    expect(iso(b.ts[0])).toBe('2024-03-04T14:30:00.000Z');
    expect([...b.high]).toEqual([5101.25, 5102, 5101.75]);
    expect(sniffFormat(join(DATA, 'ninjatrader_ok.txt'))).toBe('ninjatrader');
  });
  it('names the line of an impossible date', () => {
    expectDataError(() => load('ninjatrader_bad_date.txt', 'ninjatrader'), `${join(DATA, 'ninjatrader_bad_date.txt')}:2`, /invalid date/);
  });
});

describe('timestamps', () => {
  it('parses ISO with zones and epoch units by magnitude', () => {
    const base = 1709562600n * 1_000_000_000n;
    expect(parseTimestamp('2024-03-04T14:30:00Z')).toBe(base);
    expect(parseTimestamp('2024-03-04 14:30')).toBe(base);
    expect(parseTimestamp('2024-03-04T15:30:00+01:00')).toBe(base);
    expect(parseTimestamp('2024-03-04T14:30:00.000000123Z')).toBe(base + 123n);
    expect(parseTimestamp('1709562600')).toBe(base);
    expect(parseTimestamp('1709562600000')).toBe(base);
    expect(parseTimestamp('1709562600000000')).toBe(base);
    expect(parseTimestamp('1709562600000000000')).toBe(base);
    expect(parseTimestamp('yesterday')).toBeUndefined();
  });
});

describe('data root confinement', () => {
  const root = mkdtempSync(join(tmpdir(), 'fh-root-'));
  const outside = mkdtempSync(join(tmpdir(), 'fh-out-'));
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });
  it('resolves paths inside the root and rejects escapes', () => {
    writeFileSync(join(root, 'a.csv'), 'x');
    writeFileSync(join(outside, 'secret.csv'), 'x');
    symlinkSync(join(outside, 'secret.csv'), join(root, 'link.csv'));
    expect(resolvePathInDataRoot(root, 'a.csv')).toBe(join(root, 'a.csv'));
    expect(resolvePathInDataRoot(root, join(root, 'sub', '..', 'a.csv'))).toBe(join(root, 'a.csv'));
    for (const bad of ['../x.csv', '/etc/passwd', 'sub/../../x', 'link.csv']) {
      expect(() => resolvePathInDataRoot(root, bad)).toThrow(expect.objectContaining({ code: 'PATH_OUTSIDE_DATA_ROOT' }));
    }
  });
});

/** A contract: `n` one-minute bars from minute `start`, constant price `px`, volume `vol(i)`. */
function contract(start: number, n: number, px: number, vol: (i: number) => number, sessionEvery = 0): Bars {
  const b = allocBars(n);
  for (let i = 0; i < n; i++) {
    b.ts[i] = BigInt(start + i) * NS_PER_MINUTE;
    b.open[i] = px;
    b.high[i] = px + 0.5;
    b.low[i] = px - 0.5;
    b.close[i] = px + (i % 2) * 0.25;
    b.volume[i] = vol(i);
    b.sessionStart[i] = i === 0 || (sessionEvery > 0 && i % sessionEvery === 0) ? 1 : 0;
  }
  return b;
}

describe('contract stitching', () => {
  it('rolls at the session open after volume moves, back-adjusts and marks the roll', () => {
    // A: minutes 0..99 at 5000; B: minutes 50..149 at 5010 (+10 points), more volume from minute 60,
    // sessions every 20 bars of B (minutes 70, 90, ...).
    const a = contract(0, 100, 5000, () => 100);
    const b = contract(50, 100, 5010, (i) => (i >= 10 ? 200 : 50), 20);
    const { bars, info } = stitchContracts([a, b], 0.25, ['A', 'B']);
    const rollIdx = info.rolls[0]!;
    expect(bars.ts[rollIdx]).toBe(70n * NS_PER_MINUTE); // first B session open at/after minute 60
    expect(rollIdx).toBe(70);
    expect(bars.sessionStart[rollIdx]).toBe(1);
    // A before the roll is shifted by B - A at their last common bar before it (minute 69)
    const diff = b.close[69 - 50]! - a.close[69]!;
    expect(info.adjustments[0]).toBe(diff);
    expect(bars.close[69]).toBe(a.close[69]! + diff);
    expect(bars.close[70]).toBe(b.close[20]);
    expect(bars.close.length).toBe(70 + 80);
    for (let i = 1; i < bars.ts.length; i++) expect(bars.ts[i]! > bars.ts[i - 1]!).toBe(true);
  });

  it('rolls at the next contract after the end without overlap', () => {
    const a = contract(0, 10, 5000, () => 1);
    const b = contract(20, 10, 5100, () => 1);
    const { bars, info } = stitchContracts([a, b], 0.25);
    expect(info.rolls).toEqual([10]);
    expect(info.adjustments).toEqual([0, 0]);
    expect(bars.sessionStart[10]).toBe(1);
  });
});
