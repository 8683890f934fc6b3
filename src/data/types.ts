/**
 * The canonical market arrays (DESIGN.md §3). Bars are in time order; `ts` is the bar-start time
 * in UTC nanoseconds; prices are on the instrument's tick grid; `sessionStart[i] = 1` when bar i
 * opens a session (a gap precedes it; bar 0 always opens one). Nothing is forward-filled.
 */

export interface Bars {
  ts: BigInt64Array;
  open: Float64Array;
  high: Float64Array;
  low: Float64Array;
  close: Float64Array;
  volume: Float64Array;
  sessionStart: Uint8Array;
  symbol?: string;
}

/** [begin, end) bar indices. */
export interface Split {
  trainBegin: number;
  trainEnd: number;
  valBegin: number;
  valEnd: number;
  testBegin?: number;
  testEnd?: number;
}

export interface PreparedMarket {
  bars: Bars;
  /** Wilder ATR(14) in price units, causal, floored at one tick. */
  atr: Float64Array;
  /** (nBars, F) row-major normalised features, causal. */
  features: Float32Array;
  nFeatures: number;
  featureNames: string[];
  split: Split;
  cacheKey: string;
  cacheHit: boolean;
}

/** Allocate empty bar arrays of length n. */
export function allocBars(n: number, symbol?: string): Bars {
  const bars: Bars = {
    ts: new BigInt64Array(n),
    open: new Float64Array(n),
    high: new Float64Array(n),
    low: new Float64Array(n),
    close: new Float64Array(n),
    volume: new Float64Array(n),
    sessionStart: new Uint8Array(n),
  };
  if (symbol !== undefined) bars.symbol = symbol;
  return bars;
}

/** A copy of bars [begin, end). */
export function sliceBars(b: Bars, begin: number, end: number): Bars {
  const out: Bars = {
    ts: b.ts.slice(begin, end),
    open: b.open.slice(begin, end),
    high: b.high.slice(begin, end),
    low: b.low.slice(begin, end),
    close: b.close.slice(begin, end),
    volume: b.volume.slice(begin, end),
    sessionStart: b.sessionStart.slice(begin, end),
  };
  if (out.sessionStart.length > 0) out.sessionStart[0] = 1;
  if (b.symbol !== undefined) out.symbol = b.symbol;
  return out;
}

export const NS_PER_MINUTE = 60_000_000_000n;

/** Number of sessions (bars with sessionStart = 1) in [begin, end). */
export function countSessions(b: Bars, begin = 0, end = b.close.length): number {
  let n = 0;
  for (let i = begin; i < end; i++) n += b.sessionStart[i] ?? 0;
  return n;
}
