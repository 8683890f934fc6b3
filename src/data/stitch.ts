/**
 * Per-contract futures series stitched into one continuous, back-adjusted series.
 *
 * Contracts are given in roll order. From contract i to i+1 the roll happens at the first session
 * open of contract i+1 at or after the first common timestamp where i+1 trades more volume than i
 * (no overlap or never more volume: at the first bar of i+1 after the last bar of i). Everything
 * before the roll is shifted by the price difference between the two contracts at their last
 * common bar before the roll (close of i+1 − close of i; 0 without a common bar), so there is no
 * artificial jump; shifts are whole ticks, so prices stay on the grid. The roll bar is flagged as a
 * session start, so no return or position spans the roll.
 */
import { FoxhuntError } from '../errors.js';
import { allocBars } from './types.js';
import type { Bars } from './types.js';

function indexOfTs(b: Bars, ts: bigint): number {
  let lo = 0;
  let hi = b.ts.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = b.ts[mid] as bigint;
    if (v === ts) return mid;
    if (v < ts) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

export interface StitchInfo {
  /** Index in the stitched series of each roll bar. */
  rolls: number[];
  /** Additive adjustment applied to contract i's prices. */
  adjustments: number[];
}

export function stitchContracts(contracts: Bars[], tickSize: number, names: string[] = []): { bars: Bars; info: StitchInfo } {
  if (contracts.length === 0) throw new FoxhuntError('DATA_INVALID', 'no contracts to stitch', { where: 'data.paths' });
  // pieces[i] = [begin, end) of contract i used in the stitched series; diffs[i] = next − this at the roll
  const begin: number[] = [0];
  const end: number[] = [];
  const diffs: number[] = [];
  for (let i = 0; i + 1 < contracts.length; i++) {
    const cur = contracts[i] as Bars;
    const next = contracts[i + 1] as Bars;
    const from = begin[i] as number;
    const lastTs = cur.ts[cur.ts.length - 1] as bigint;
    // first common ts (within cur's used part) where next trades more volume
    let rollTs: bigint | undefined;
    for (let j = 0; j < next.ts.length; j++) {
      const ts = next.ts[j] as bigint;
      if (ts < (cur.ts[from] as bigint)) continue;
      const k = indexOfTs(cur, ts);
      if (k >= from && (next.volume[j] as number) > (cur.volume[k] as number)) {
        rollTs = ts;
        break;
      }
    }
    let r = -1; // roll index in next
    if (rollTs !== undefined) {
      for (let j = indexOfTs(next, rollTs); j < next.ts.length; j++) {
        if (next.sessionStart[j] === 1 && (next.ts[j] as bigint) >= rollTs) {
          r = j;
          break;
        }
      }
    }
    if (r < 0) {
      r = next.ts.findIndex((ts) => ts > lastTs);
      if (r < 0) {
        throw new FoxhuntError('DATA_INVALID', `contract ${names[i + 1] ?? i + 1} has no bar after the end of contract ${names[i] ?? i}`, { where: 'data.paths' });
      }
    }
    const rTs = next.ts[r] as bigint;
    // cur is used up to (not including) rTs
    let e = from;
    while (e < cur.ts.length && (cur.ts[e] as bigint) < rTs) e++;
    if (e === from) throw new FoxhuntError('DATA_INVALID', `contract ${names[i] ?? i} contributes no bar before its roll`, { where: 'data.paths' });
    end.push(e);
    // price difference at the last common bar before the roll
    let diff = 0;
    for (let j = r - 1; j >= 0; j--) {
      const k = indexOfTs(cur, next.ts[j] as bigint);
      if (k >= from && k < e) {
        diff = Math.round(((next.close[j] as number) - (cur.close[k] as number)) / tickSize) * tickSize;
        break;
      }
    }
    diffs.push(diff);
    begin.push(r);
  }
  end.push((contracts[contracts.length - 1] as Bars).ts.length);

  // cumulative adjustment of contract i = sum of diffs i..last-1
  const adj = new Array<number>(contracts.length).fill(0);
  for (let i = contracts.length - 2; i >= 0; i--) adj[i] = (adj[i + 1] as number) + (diffs[i] as number);

  let n = 0;
  for (let i = 0; i < contracts.length; i++) n += (end[i] as number) - (begin[i] as number);
  const out = allocBars(n, contracts[contracts.length - 1]?.symbol);
  const rolls: number[] = [];
  let o = 0;
  for (let i = 0; i < contracts.length; i++) {
    const c = contracts[i] as Bars;
    const a = adj[i] as number;
    if (i > 0) rolls.push(o);
    for (let j = begin[i] as number; j < (end[i] as number); j++, o++) {
      out.ts[o] = c.ts[j] as bigint;
      out.open[o] = (c.open[j] as number) + a;
      out.high[o] = (c.high[j] as number) + a;
      out.low[o] = (c.low[j] as number) + a;
      out.close[o] = (c.close[j] as number) + a;
      out.volume[o] = c.volume[j] as number;
      out.sessionStart[o] = j === begin[i] ? 1 : (c.sessionStart[j] as number);
      if (!((out.low[o] as number) > 0)) {
        throw new FoxhuntError('DATA_INVALID', `back-adjustment by ${a} makes prices non-positive in contract ${names[i] ?? i}`, { where: 'data.paths' });
      }
    }
  }
  return { bars: out, info: { rolls, adjustments: adj } };
}
