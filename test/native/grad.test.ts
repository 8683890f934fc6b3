/**
 * Finite-difference check of fh_trainer_loss_grad: the gradient of the whole network plus the loss
 * (trunk, heads, dueling combine, Huber or C51 cross-entropy, importance weights) with respect to
 * every online parameter, for plain Q and for C51. Central differences in float32 parameters with
 * the actually representable step; tolerance |fd - g| <= 2e-3 + 5e-2*|g| per parameter (a few
 * parameters may straddle a ReLU kink or an argmax switch: at most 1% may miss), and the relative
 * error of the whole vector below 3e-2.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import { rng, tinyConfig, withCpuTrainer } from './helpers.js';
import { layout } from './layout.js';

const CASES = [
  { name: 'plain Q (Huber)', atoms: 1, sets: ['agent.atoms=1', 'agent.huber_delta=0.5'] },
  { name: 'C51 (cross-entropy)', atoms: 7, sets: ['agent.atoms=7', 'agent.v_min=-2', 'agent.v_max=2'] },
];

describe('native loss gradient vs finite differences', () => {
  test.each(CASES)('$name', ({ atoms, sets }) => {
    const cfg = tinyConfig(['env.window=2', 'agent.hidden1=8', 'agent.hidden2=8', 'agent.head_hidden=4', ...sets]);
    withCpuTrainer(cfg, ({ l, h, D, P }) => {
      const branches = cfg.env.branch_sizes;
      const L = layout(D, 8, 8, 4, atoms, branches);
      const r = rng(31);
      const params = new Float32Array(P);
      expect(l.fh_trainer_get_params(h, 0, params, P)).toBe(FhStatus.OK);
      // non-zero biases so every block is exercised (init biases are 0); pads stay 0
      const bias = (at: number, n: number): void => {
        for (let i = 0; i < n; i++) params[at + i] = (r() - 0.5) * 0.2;
      };
      bias(L.b1, 8);
      bias(L.b2, 8);
      bias(L.bH, 16);
      for (let k = 0; k < 4; k++) bias(L.bO[k] as number, L.out[k] as number);
      expect(l.fh_trainer_set_params(h, 0, params, P)).toBe(FhStatus.OK);
      const target = params.map((x) => x * (0.8 + 0.4 * r()));
      expect(l.fh_trainer_set_params(h, 1, target, P)).toBe(FhStatus.OK);

      const B = 6;
      const obs = Float32Array.from({ length: B * D }, () => (r() - 0.5) * 2);
      const next = Float32Array.from({ length: B * D }, () => (r() - 0.5) * 2);
      const act = Int32Array.from({ length: B * 3 }, (_, i) => Math.floor(r() * (branches[i % 3] as number)));
      const ret = Float32Array.from({ length: B }, () => (r() - 0.5) * 3);
      const disc = Float32Array.from({ length: B }, (_, i) => (i === 0 ? 0 : Math.fround(0.9 ** 3)));
      const w = Float32Array.from({ length: B }, () => 0.3 + 0.7 * r());

      const grad = new Float32Array(P);
      const loss: [number] = [0];
      expect(l.fh_trainer_loss_grad(h, B, obs, act, ret, disc, next, w, loss, grad, null)).toBe(FhStatus.OK);
      const lossAt = (p: Float32Array): number => {
        expect(l.fh_trainer_set_params(h, 0, p, P)).toBe(FhStatus.OK);
        const out: [number] = [0];
        expect(l.fh_trainer_loss_grad(h, B, obs, act, ret, disc, next, w, out, null, null)).toBe(FhStatus.OK);
        return out[0];
      };

      const step = 1e-3;
      const probe = Float32Array.from(params);
      let misses = 0;
      let checked = 0;
      let diff2 = 0;
      let norm2 = 0;
      for (let i = 0; i < P; i++) {
        const x = params[i] as number;
        const isPad = x === 0 && grad[i] === 0 && !inBlock(L, i);
        if (isPad) continue;
        probe[i] = x + step;
        const hi = probe[i] as number;
        const fp = lossAt(probe);
        probe[i] = x - step;
        const lo = probe[i] as number;
        const fm = lossAt(probe);
        probe[i] = x;
        const fd = (fp - fm) / (hi - lo);
        const g = grad[i] as number;
        checked++;
        if (Math.abs(fd - g) > 2e-3 + 5e-2 * Math.abs(g)) misses++;
        if (process.env['FH_DEBUG_GRAD'] && Math.abs(fd - g) > 1e-3) console.log(i, fd, g);
        diff2 += (fd - g) ** 2;
        norm2 += g * g;
      }
      expect(lossAt(params)).toBe(loss[0]); // restoring the parameters restores the loss exactly
      if (process.env['FH_DEBUG_GRAD']) console.log('checked', checked, 'misses', misses, 'norm', Math.sqrt(norm2), 'diff', Math.sqrt(diff2));
      expect(checked).toBeGreaterThan(300);
      expect(misses).toBeLessThanOrEqual(Math.floor(checked * 0.01));
      expect(Math.sqrt(diff2 / norm2)).toBeLessThan(3e-2);
      // pad rows of the output heads get no gradient
      for (let k = 0; k < 4; k++) {
        for (let row = L.out[k] as number; row < (L.outPad[k] as number); row++) {
          expect(grad[(L.bO[k] as number) + row]).toBe(0);
          for (let c = 0; c < 4; c++) expect(grad[(L.WO[k] as number) + row * 4 + c]).toBe(0);
        }
      }
    });
  });
});

/** Whether parameter i belongs to a real (non-pad, non-alignment) element of the layout. */
function inBlock(L: ReturnType<typeof layout>, i: number): boolean {
  const spans: Array<[number, number]> = [
    [L.W1, L.b1], [L.b1, L.b1 + 8], [L.W2, L.W2 + 64], [L.b2, L.b2 + 8], [L.WH, L.WH + 16 * 8], [L.bH, L.bH + 16],
  ];
  for (let k = 0; k < 4; k++) {
    spans.push([L.WO[k] as number, (L.WO[k] as number) + (L.out[k] as number) * 4]);
    spans.push([L.bO[k] as number, (L.bO[k] as number) + (L.out[k] as number)]);
  }
  return spans.some(([a, b]) => i >= a && i < b);
}
