/**
 * Row validation shared by every loader. Each row is checked as it arrives (finite positive
 * prices on the tick grid, high >= max(open, close), low <= min(open, close), volume >= 0,
 * strictly increasing time) and a bad row fails with DATA_INVALID at "file:line". Session starts
 * are flagged where the gap to the previous bar exceeds the session gap; nothing is forward-filled.
 */
import { FoxhuntError } from '../errors.js';
import { allocBars, NS_PER_MINUTE } from './types.js';
import type { Bars } from './types.js';

export interface LoadOptions {
  /** Prices must lie on this grid (within 1e-6 ticks); they are snapped to it exactly. */
  tickSize: number;
  /** A gap longer than this (minutes) starts a session (default 30). */
  sessionGapMinutes?: number;
  symbol?: string;
}

export class BarBuilder {
  private ts: bigint[] = [];
  private o: number[] = [];
  private h: number[] = [];
  private l: number[] = [];
  private c: number[] = [];
  private v: number[] = [];
  private readonly tick: number;

  constructor(readonly file: string, readonly opts: LoadOptions) {
    this.tick = opts.tickSize;
  }

  fail(line: number, reason: string): never {
    throw new FoxhuntError('DATA_INVALID', reason, { where: `${this.file}:${line}` });
  }

  private price(line: number, name: string, v: number): number {
    if (!Number.isFinite(v)) this.fail(line, `${name} is not a finite number`);
    if (!(v > 0)) this.fail(line, `${name} ${v} is not positive`);
    const ticks = v / this.tick;
    const r = Math.round(ticks);
    if (Math.abs(ticks - r) > 1e-6 * Math.max(1, Math.abs(r)) && Math.abs(ticks - r) > 1e-6) {
      this.fail(line, `${name} ${v} is not on the tick grid of ${this.tick}`);
    }
    return r * this.tick;
  }

  add(line: number, ts: bigint, open: number, high: number, low: number, close: number, volume: number): void {
    const o = this.price(line, 'open', open);
    const h = this.price(line, 'high', high);
    const l = this.price(line, 'low', low);
    const c = this.price(line, 'close', close);
    if (!Number.isFinite(volume) || volume < 0) this.fail(line, `volume ${volume} is not a finite number >= 0`);
    if (h < Math.max(o, c)) this.fail(line, `high ${h} is below max(open ${o}, close ${c})`);
    if (l > Math.min(o, c)) this.fail(line, `low ${l} is above min(open ${o}, close ${c})`);
    const prev = this.ts[this.ts.length - 1];
    if (prev !== undefined && ts <= prev) {
      this.fail(line, `time ${new Date(Number(ts / 1_000_000n)).toISOString()} is not after the previous bar's ${new Date(Number(prev / 1_000_000n)).toISOString()}`);
    }
    this.ts.push(ts);
    this.o.push(o);
    this.h.push(h);
    this.l.push(l);
    this.c.push(c);
    this.v.push(volume);
  }

  get length(): number {
    return this.ts.length;
  }

  finish(): Bars {
    if (this.ts.length === 0) throw new FoxhuntError('DATA_INVALID', 'no bars in file', { where: this.file });
    const n = this.ts.length;
    const b = allocBars(n, this.opts.symbol);
    const gap = BigInt(Math.round((this.opts.sessionGapMinutes ?? 30) * 60)) * (NS_PER_MINUTE / 60n);
    for (let i = 0; i < n; i++) {
      b.ts[i] = this.ts[i] as bigint;
      b.open[i] = this.o[i] as number;
      b.high[i] = this.h[i] as number;
      b.low[i] = this.l[i] as number;
      b.close[i] = this.c[i] as number;
      b.volume[i] = this.v[i] as number;
      b.sessionStart[i] = i === 0 || (this.ts[i] as bigint) - (this.ts[i - 1] as bigint) > gap ? 1 : 0;
    }
    return b;
  }
}

/** Split a delimited line (quotes stripped, fields trimmed). */
export function splitFields(line: string, delim: string): string[] {
  return line.split(delim).map((f) => {
    const t = f.trim();
    return t.length >= 2 && t.startsWith('"') && t.endsWith('"') ? t.slice(1, -1) : t;
  });
}

/** Lines of a text file with their 1-based numbers, blank lines skipped. */
export function* numberedLines(text: string): Generator<[number, string]> {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i] as string;
    if (l.trim() !== '') yield [i + 1, l];
  }
}

/**
 * A timestamp as UTC nanoseconds: ISO-8601 (no zone = UTC) or an epoch number whose unit follows
 * from its size (s < 1e11 <= ms < 1e14 <= us < 1e17 <= ns). Returns undefined when unparseable.
 */
export function parseTimestamp(s: string): bigint | undefined {
  const t = s.trim();
  if (/^-?\d+$/.test(t)) {
    const v = BigInt(t);
    const a = v < 0n ? -v : v;
    if (a < 100_000_000_000n) return v * 1_000_000_000n;
    if (a < 100_000_000_000_000n) return v * 1_000_000n;
    if (a < 100_000_000_000_000_000n) return v * 1_000n;
    return v;
  }
  if (/^-?\d+\.\d+$/.test(t)) {
    const v = Number(t);
    if (!Number.isFinite(v)) return undefined;
    const a = Math.abs(v);
    const scale = a < 1e11 ? 1e9 : a < 1e14 ? 1e6 : a < 1e17 ? 1e3 : 1;
    return BigInt(Math.round(v * scale));
  }
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/.exec(t)
    ?? /^(\d{4}-\d{2}-\d{2})()()()$/.exec(t);
  if (!m) return undefined;
  const [, date, hms, frac, zone] = m;
  const time = hms ? (hms.length === 5 ? `${hms}:00` : hms) : '00:00:00';
  const z = zone ? (zone === 'Z' ? 'Z' : zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone) : 'Z';
  const ms = Date.parse(`${date}T${time}${z}`);
  if (!Number.isFinite(ms)) return undefined;
  let ns = BigInt(ms) * 1_000_000n;
  if (frac) ns += BigInt((frac.slice(1) + '000000000').slice(0, 9));
  return ns;
}
