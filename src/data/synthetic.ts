/**
 * Seeded, deterministic synthetic futures markets (SPEC §2), the embedded default data source.
 *
 * Common shape: `days` trading sessions (weekdays; a session of `bars_per_day` one-minute bars
 * starting 23:00 UTC the calendar day before, so 1380 bars end 22:00 UTC and leave an hour's gap),
 * every price on the tick grid, open = previous close inside a session, a random gap at each session
 * open, high/low a few ticks beyond the body, volume lognormal with a U-shaped intraday profile.
 * Per-minute volatility σ = 2.2e-4 × start_price (≈ 1 point for ES at 4500). All randomness is a
 * Philox stream keyed by `synthetic.seed` (purpose SYNTHETIC), so a (config) gives the same bars on
 * every machine.
 *
 * Markets:
 * - `null`: a driftless random walk (integer tick steps, rounded from N(0, σ)). No policy has an
 *   edge; after costs every active policy loses.
 * - `edge`: a hidden regime r ∈ {−1 (down), 0 (flat), +1 (up)} switches with probability 1/100 per
 *   bar (mean duration 100 bars; the new regime is one of the two others, tilted back toward the
 *   start price so the path stays in range). Each bar's move is r·0.25σ plus N(0, σ) noise.
 *   THE ORACLE: at the close of bar t hold `regime[t] × max_contracts` (long in an up regime, short
 *   in a down regime, flat otherwise). It earns ≈ 0.25σ per bar held minus the cost of one round
 *   trip per regime change, a clearly positive after-cost Sharpe (`foxhunt oracle` prints it).
 *   A causal policy can capture part of it: momentum (the sign of the last ~30 bars' return) tracks
 *   the regime after a lag.
 * - `intraday`: a driftless walk with realistic sessions: a U-shaped volatility smile over the day
 *   (≈ 2× at the open and close, 0.7× at midday), day-to-day volatility clustering (lognormal
 *   daily factor with AR(1) persistence) and a matching U-shaped volume profile. No edge.
 */
import type { InstrumentConfig, SyntheticConfig } from '../config/schema.js';
import { PhiloxStream } from '../env/philox.js';
import { allocBars, NS_PER_MINUTE } from './types.js';
import type { Bars } from './types.js';

export interface SyntheticMarket {
  bars: Bars;
  /** (nBars) the hidden regime of each bar (edge market); all 0 for null and intraday. */
  regime: Int8Array;
}

/** Per-minute volatility as a fraction of the start price. */
export const SIGMA_FRACTION = 2.2e-4;
/** Edge market: drift per bar in a trending regime, in units of σ. */
export const EDGE_DRIFT_SIGMAS = 0.25;
/** Edge market: regime switch probability per bar. */
export const EDGE_SWITCH_PROB = 0.01;

const DAY_NS = 24n * 60n * NS_PER_MINUTE;
/** Monday 2021-01-04 00:00 UTC. */
const FIRST_DAY_NS = BigInt(Date.UTC(2021, 0, 4)) * 1_000_000n;

/** Session start times: weekdays, each 23:00 UTC of the previous calendar day. */
function sessionStarts(days: number, barsPerDay: number): bigint[] {
  const daysPerSession = Math.max(1, Math.ceil((barsPerDay + 31) / 1440));
  const out: bigint[] = [];
  let day = 0; // calendar days after FIRST_DAY (a Monday)
  for (let d = 0; d < days; d++) {
    while (day % 7 >= 5) day++;
    out.push(FIRST_DAY_NS + BigInt(day) * DAY_NS - 60n * NS_PER_MINUTE);
    day += daysPerSession;
  }
  return out;
}

/** U-shaped intraday profile over x ∈ [0, 1]: 2.0 at both ends, 0.7 at midday. */
function smile(x: number): number {
  const u = 2 * x - 1;
  return 0.7 + 1.3 * u * u;
}

/** Generate a synthetic market (deterministic in `syn` and the tick size). */
export function generateSynthetic(syn: SyntheticConfig, instrument: Pick<InstrumentConfig, 'tick_size' | 'symbol'>): SyntheticMarket {
  const { days, bars_per_day: bpd, market } = syn;
  const tick = instrument.tick_size;
  const n = days * bpd;
  const bars = allocBars(n, instrument.symbol);
  const regime = new Int8Array(n);
  const rng = new PhiloxStream(syn.seed, market === 'null' ? 0 : market === 'edge' ? 1 : 2);
  const sigma = SIGMA_FRACTION * syn.start_price;
  const drift = EDGE_DRIFT_SIGMAS * sigma;
  const startTicks = Math.round(syn.start_price / tick);
  const floorTicks = Math.max(1, Math.round(startTicks * 0.1));
  const starts = sessionStarts(days, bpd);

  let closeTicks = startTicks;
  let r = 0;
  let dayVol = 0; // log of the intraday market's daily volatility factor (AR(1))
  let i = 0;
  for (let d = 0; d < days; d++) {
    const t0 = starts[d] as bigint;
    if (market === 'intraday') dayVol = 0.8 * dayVol + 0.25 * rng.normal();
    const dayFactor = market === 'intraday' ? Math.exp(dayVol - 0.5 * 0.25 * 0.25 / (1 - 0.64)) : 1;
    for (let m = 0; m < bpd; m++, i++) {
      const x = bpd > 1 ? m / (bpd - 1) : 0.5;
      const shape = smile(x);
      const vol = market === 'intraday' ? sigma * dayFactor * shape : sigma;

      if (market === 'edge' && rng.uniform() < EDGE_SWITCH_PROB) {
        // Move to one of the two other regimes, tilted back toward the start price.
        const lx = Math.log(closeTicks / startTicks);
        const a = r === -1 ? 0 : -1;
        const b = r === 1 ? 0 : 1;
        const wa = Math.exp(-a * lx * 5);
        const wb = Math.exp(-b * lx * 5);
        r = rng.uniform() * (wa + wb) < wa ? a : b;
      }
      regime[i] = r;

      let openTicks = closeTicks;
      if (m === 0 && i > 0) openTicks += Math.round((3 * sigma * rng.normal()) / tick);
      let step = Math.round((r * drift + vol * rng.normal()) / tick);
      if (openTicks + step < floorTicks) step = Math.abs(step);
      if (openTicks < floorTicks) openTicks = floorTicks;
      closeTicks = openTicks + step;
      const up = Math.floor(Math.abs(rng.normal()) * 0.5 * vol / tick);
      const down = Math.floor(Math.abs(rng.normal()) * 0.5 * vol / tick);
      const hiTicks = Math.max(openTicks, closeTicks) + up;
      const loTicks = Math.max(1, Math.min(openTicks, closeTicks) - down);

      bars.ts[i] = t0 + BigInt(m) * NS_PER_MINUTE;
      bars.open[i] = openTicks * tick;
      bars.close[i] = closeTicks * tick;
      bars.high[i] = hiTicks * tick;
      bars.low[i] = loTicks * tick;
      bars.volume[i] = Math.round(1000 * shape * Math.exp(0.4 * rng.normal()));
      bars.sessionStart[i] = m === 0 ? 1 : 0;
    }
  }
  return { bars, regime };
}

/** The documented oracle of the edge market: target at the close of bar t = regime[t] × max. */
export function oracleTargets(regime: Int8Array, maxContracts: number): Int32Array {
  const out = new Int32Array(regime.length);
  for (let t = 0; t < regime.length; t++) out[t] = (regime[t] ?? 0) * maxContracts;
  return out;
}
