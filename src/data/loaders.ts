/**
 * Loaders of market data files into the canonical bars (src/data/types.ts):
 * - generic OHLCV CSV: a header row naming time/timestamp/date/datetime (or separate date and time
 *   columns), open, high, low, close, volume (case-insensitive, any order, extra columns ignored;
 *   comma, semicolon or tab separated); ISO-8601 (no zone = UTC) or epoch s/ms/us/ns timestamps;
 * - Databento `ohlcv-1m` CSV: `ts_event` (ns, or ISO with pretty_ts), open..close as fixed-point
 *   integers of 1e-9 (or decimals with pretty_px), volume; missing minutes simply have no row; one
 *   instrument per file;
 * - NinjaTrader minute export `yyyyMMdd HHmmss;O;H;L;C;V`: NinjaTrader stamps a bar with its close
 *   time, so the bar start is that minus one minute; the time is read as UTC.
 * Every row is validated (src/data/builder.ts); errors name file:line.
 */
import { readFileSync } from 'node:fs';
import { FoxhuntError } from '../errors.js';
import { BarBuilder, numberedLines, parseTimestamp, splitFields } from './builder.js';
import type { LoadOptions } from './builder.js';
import type { Bars } from './types.js';

export type { LoadOptions } from './builder.js';
export type DataFormat = 'csv' | 'databento' | 'ninjatrader';

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new FoxhuntError('DATA_INVALID', `cannot read: ${(err as Error).message}`, { where: file, cause: err });
  }
}

function num(b: BarBuilder, line: number, name: string, s: string | undefined): number {
  if (s === undefined || s === '') b.fail(line, `missing ${name}`);
  const v = Number(s);
  if (!Number.isFinite(v)) b.fail(line, `${name} ${JSON.stringify(s)} is not a number`);
  return v;
}

function detectDelimiter(header: string): string {
  for (const d of [',', ';', '\t']) if (header.includes(d)) return d;
  return ',';
}

export function parseGenericCsv(text: string, file: string, opts: LoadOptions): Bars {
  const b: BarBuilder = new BarBuilder(file, opts);
  const it = numberedLines(text);
  const first = it.next();
  if (first.done) throw new FoxhuntError('DATA_INVALID', 'empty file', { where: `${file}:1` });
  const [hLine, header] = first.value;
  const delim = detectDelimiter(header);
  const cols = splitFields(header, delim).map((c) => c.toLowerCase());
  const find = (...names: string[]): number => cols.findIndex((c) => names.includes(c));
  let iTime = find('time', 'timestamp', 'datetime', 'ts', 'ts_event');
  const iDate = find('date');
  let iClock = -1;
  if (iTime >= 0 && iDate >= 0 && cols[iTime] === 'time') iClock = iTime; // separate date + time columns
  if (iTime < 0) iTime = iDate;
  const idx = {
    open: find('open', 'o'), high: find('high', 'h'), low: find('low', 'l'), close: find('close', 'c'), volume: find('volume', 'vol', 'v'),
  };
  const missing = Object.entries({ time: iTime, ...idx }).filter(([, i]) => i < 0).map(([k]) => k);
  if (missing.length > 0) {
    b.fail(hLine, `header lacks column(s) ${missing.join(', ')} (found: ${cols.join(', ')})`);
  }
  for (const [line, text1] of it) {
    const f = splitFields(text1, delim);
    if (f.length < cols.length) b.fail(line, `expected ${cols.length} fields, found ${f.length}`);
    const tsText = iClock >= 0 ? `${f[iDate] ?? ''} ${f[iClock] ?? ''}` : (f[iTime] ?? '');
    const ts = parseTimestamp(tsText);
    if (ts === undefined) b.fail(line, `unreadable timestamp ${JSON.stringify(tsText)}`);
    b.add(line, ts, num(b, line, 'open', f[idx.open]), num(b, line, 'high', f[idx.high]), num(b, line, 'low', f[idx.low]),
      num(b, line, 'close', f[idx.close]), num(b, line, 'volume', f[idx.volume]));
  }
  return b.finish();
}

/** A Databento price: an integer of 1e-9 units, or a decimal when exported with pretty_px. */
function databentoPrice(b: BarBuilder, line: number, name: string, s: string | undefined): number {
  if (s === undefined || s === '') b.fail(line, `missing ${name}`);
  if (/^-?\d+$/.test(s)) {
    const v = BigInt(s);
    const whole = v / 1_000_000_000n;
    const frac = v % 1_000_000_000n;
    return Number(whole) + Number(frac) / 1e9;
  }
  return num(b, line, name, s);
}

export function parseDatabentoCsv(text: string, file: string, opts: LoadOptions): Bars {
  const b: BarBuilder = new BarBuilder(file, opts);
  const it = numberedLines(text);
  const first = it.next();
  if (first.done) throw new FoxhuntError('DATA_INVALID', 'empty file', { where: `${file}:1` });
  const [hLine, header] = first.value;
  const cols = splitFields(header, ',').map((c) => c.toLowerCase());
  const col = (n: string): number => cols.indexOf(n);
  const need = ['ts_event', 'open', 'high', 'low', 'close', 'volume'];
  const missing = need.filter((n) => col(n) < 0);
  if (missing.length > 0) b.fail(hLine, `not a Databento ohlcv CSV: header lacks ${missing.join(', ')}`);
  const iSym = col('symbol') >= 0 ? col('symbol') : col('instrument_id');
  let symbol: string | undefined;
  for (const [line, t] of it) {
    const f = splitFields(t, ',');
    if (f.length < cols.length) b.fail(line, `expected ${cols.length} fields, found ${f.length}`);
    if (iSym >= 0) {
      const s = f[iSym] ?? '';
      if (symbol === undefined) symbol = s;
      else if (s !== symbol) b.fail(line, `a second instrument ${JSON.stringify(s)} after ${JSON.stringify(symbol)}: one instrument per file (split per contract and stitch with data.paths)`);
    }
    if (col('rtype') >= 0 && f[col('rtype')] !== '33') {
      b.fail(line, `rtype ${JSON.stringify(f[col('rtype')])} is not ohlcv-1m (33)`);
    }
    const tsText = f[col('ts_event')] ?? '';
    const ts = /^\d+$/.test(tsText) ? BigInt(tsText) : parseTimestamp(tsText);
    if (ts === undefined) b.fail(line, `unreadable ts_event ${JSON.stringify(tsText)}`);
    b.add(line, ts, databentoPrice(b, line, 'open', f[col('open')]), databentoPrice(b, line, 'high', f[col('high')]),
      databentoPrice(b, line, 'low', f[col('low')]), databentoPrice(b, line, 'close', f[col('close')]), num(b, line, 'volume', f[col('volume')]));
  }
  const bars = b.finish();
  if (bars.symbol === undefined && symbol !== undefined && symbol !== '') bars.symbol = symbol;
  return bars;
}

export function parseNinjaTrader(text: string, file: string, opts: LoadOptions): Bars {
  const b: BarBuilder = new BarBuilder(file, opts);
  for (const [line, t] of numberedLines(text)) {
    const f = splitFields(t, ';');
    if (f.length !== 6) b.fail(line, `expected "yyyyMMdd HHmmss;open;high;low;close;volume" (6 fields), found ${f.length}`);
    const m = /^(\d{4})(\d{2})(\d{2}) (\d{2})(\d{2})(\d{2})$/.exec(f[0] as string);
    if (!m) b.fail(line, `unreadable time ${JSON.stringify(f[0])} (expected yyyyMMdd HHmmss)`);
    const [, y, mo, d, hh, mi, ss] = m.map(Number) as [number, number, number, number, number, number, number];
    const ms = Date.UTC(y, mo - 1, d, hh, mi, ss);
    const check = new Date(ms);
    if (check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d || hh > 23 || mi > 59 || ss > 59) {
      b.fail(line, `invalid date/time ${JSON.stringify(f[0])}`);
    }
    const ts = (BigInt(ms) - 60_000n) * 1_000_000n;
    b.add(line, ts, num(b, line, 'open', f[1]), num(b, line, 'high', f[2]), num(b, line, 'low', f[3]),
      num(b, line, 'close', f[4]), num(b, line, 'volume', f[5]));
  }
  return b.finish();
}

export function loadBarsFile(file: string, format: DataFormat, opts: LoadOptions): Bars {
  const text = readText(file);
  switch (format) {
    case 'csv':
      return parseGenericCsv(text, file, opts);
    case 'databento':
      return parseDatabentoCsv(text, file, opts);
    case 'ninjatrader':
      return parseNinjaTrader(text, file, opts);
  }
}

/** Guess a file's format from its first line. */
export function sniffFormat(file: string): DataFormat {
  const firstLine = (readText(file).split(/\r?\n/, 1)[0] ?? '').toLowerCase();
  if (firstLine.includes('ts_event')) return 'databento';
  if (/^\d{8} \d{6};/.test(firstLine)) return 'ninjatrader';
  return 'csv';
}
