/** Small hand-made markets for the env and metrics tests. */
import type { EnvParams, MarketView } from '../../src/env/reference.js';

export interface HandBars {
  open: number[];
  high: number[];
  low: number[];
  close: number[];
  atr?: number[];
  sessionStart?: number[];
}

/** A market view with one zero feature per bar; train range = all bars unless given. */
export function handMarket(b: HandBars, trainEnd?: number): MarketView {
  const n = b.close.length;
  const ss = new Uint8Array(n);
  ss[0] = 1;
  b.sessionStart?.forEach((v, i) => (ss[i] = v));
  return {
    features: new Float32Array(n),
    nFeatures: 1,
    open: Float64Array.from(b.open),
    high: Float64Array.from(b.high),
    low: Float64Array.from(b.low),
    close: Float64Array.from(b.close),
    atr: Float64Array.from(b.atr ?? new Array<number>(n).fill(1)),
    sessionStart: ss,
    nBars: n,
    trainBegin: 0,
    trainEnd: trainEnd ?? n,
  };
}

/** ES economics: $50/pt, tick 0.25, $2.25 commission, 1 tick slippage; one fill of 1 lot costs 14.75. */
export function esParams(over: Partial<EnvParams> = {}): EnvParams {
  return {
    nDir: 3, nSize: 4, nStop: 3, maxContracts: 1, flattenAtSessionBreak: true, episodeLen: 100, window: 1,
    pointValue: 50, tickSize: 0.25, commission: 2.25, slippageTicks: 1, stopAtrMult: 1, riskPenalty: 0,
    rewardScale: 100, ...over,
  };
}

export const LONG: [number, number] = [2, 3];
export const SHORT: [number, number] = [0, 3];
export const FLAT: [number, number] = [1, 0];
