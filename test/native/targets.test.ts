/**
 * C51 projection and the double-DQN n-step target of the native loss against small TypeScript
 * references written here: fh_c51_project on random distributions, and fh_trainer_loss_grad's loss
 * and per-sample priority signal for plain Q (Huber) and C51 (cross-entropy).
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import type { NativeLib, TrainerHandle } from '../../src/native/binding.js';
import { lib, rng, tinyConfig, withCpuTrainer } from './helpers.js';
import { layout } from './layout.js';

/** C51 projection of one distribution (float64 reference). */
function project(probs: ArrayLike<number>, ret: number, disc: number, vmin: number, vmax: number): number[] {
  const A = probs.length;
  const dz = (vmax - vmin) / (A - 1);
  const out = new Array<number>(A).fill(0);
  for (let j = 0; j < A; j++) {
    const tz = Math.min(vmax, Math.max(vmin, ret + disc * (vmin + j * dz)));
    const b = (tz - vmin) / dz;
    const lo = Math.floor(b);
    const hi = Math.ceil(b);
    const pj = probs[j] as number;
    if (lo === hi) out[lo] = (out[lo] as number) + pj;
    else {
      out[lo] = (out[lo] as number) + pj * (hi - b);
      out[hi] = (out[hi] as number) + pj * (b - lo);
    }
  }
  return out;
}

function softmax(x: ArrayLike<number>): number[] {
  const mx = Math.max(...Array.from(x));
  const e = Array.from(x, (v) => Math.exp(v - mx));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

const huber = (d: number, delta: number): number => (Math.abs(d) <= delta ? 0.5 * d * d : delta * (Math.abs(d) - 0.5 * delta));
const argmax = (x: number[]): number => x.reduce((best, v, i) => (v > (x[best] as number) ? i : best), 0);

describe('native C51 projection', () => {
  test('matches the reference and conserves mass', () => {
    const r = rng(21);
    const n = 200;
    const A = 51;
    const vmin = -10;
    const vmax = 10;
    const probs = new Float32Array(n * A);
    const ret = new Float32Array(n);
    const disc = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const raw = Array.from({ length: A }, () => r() ** 3);
      const s = raw.reduce((a, b) => a + b, 0);
      raw.forEach((v, j) => (probs[i * A + j] = v / s));
      ret[i] = (r() - 0.5) * 30; // includes returns beyond the support (clamped)
      disc[i] = i % 5 === 0 ? 0 : i % 5 === 1 ? 1 : Math.fround(0.99 ** 3 * r());
    }
    const out = new Float32Array(n * A);
    expect(lib().fh_c51_project(n, A, vmin, vmax, probs, ret, disc, out)).toBe(FhStatus.OK);
    for (let i = 0; i < n; i++) {
      const ref = project(probs.subarray(i * A, (i + 1) * A), ret[i] as number, disc[i] as number, vmin, vmax);
      let mass = 0;
      for (let j = 0; j < A; j++) {
        expect(Math.abs((out[i * A + j] as number) - (ref[j] as number))).toBeLessThan(1e-5);
        mass += out[i * A + j] as number;
      }
      expect(mass).toBeCloseTo(1, 5);
    }
    // disc = 0: all mass lands on the two atoms around clamp(ret)
    const i0 = 0;
    const nonzero = Array.from(out.subarray(i0 * A, (i0 + 1) * A)).filter((v) => v > 0).length;
    expect(nonzero).toBeLessThanOrEqual(2);
  });

  test('rejects bad arguments', () => {
    const z = new Float32Array(4);
    expect(lib().fh_c51_project(1, 1, -1, 1, z, z, z, z)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
    expect(lib().fh_c51_project(1, 4, 1, -1, z, z, z, z)).toBe(FhStatus.ERR_INVALID_ARGUMENT);
  });
});

interface Batch { obs: Float32Array; next: Float32Array; act: Int32Array; ret: Float32Array; disc: Float32Array; w: Float32Array }

function randomBatch(B: number, D: number, branches: number[], seed: number): Batch {
  const r = rng(seed);
  const b: Batch = {
    obs: Float32Array.from({ length: B * D }, () => (r() - 0.5) * 2),
    next: Float32Array.from({ length: B * D }, () => (r() - 0.5) * 2),
    act: new Int32Array(B * 3),
    ret: Float32Array.from({ length: B }, () => (r() - 0.5) * 4),
    disc: Float32Array.from({ length: B }, (_, i) => (i % 3 === 0 ? 0 : Math.fround(0.9 ** 3))),
    w: Float32Array.from({ length: B }, () => 0.2 + 0.8 * r()),
  };
  for (let i = 0; i < B; i++) for (let d = 0; d < 3; d++) b.act[3 * i + d] = Math.floor(r() * (branches[d] as number));
  return b;
}

function qValues(l: NativeLib, h: TrainerHandle, params: Float32Array, obs: Float32Array, n: number, nAct: number): Float32Array {
  expect(l.fh_trainer_set_params(h, 0, params, params.length)).toBe(FhStatus.OK);
  const q = new Float32Array(n * nAct);
  expect(l.fh_trainer_q_values(h, n, obs, q)).toBe(FhStatus.OK);
  return q;
}

describe('native double-DQN n-step target', () => {
  test('plain Q: Huber loss and |TD| signal match a reference built from online and target Q values', () => {
    const cfg = tinyConfig(['env.window=2', 'agent.hidden1=16', 'agent.hidden2=16', 'agent.head_hidden=8', 'agent.atoms=1']);
    withCpuTrainer(cfg, ({ l, h, D, P }) => {
      const branches = cfg.env.branch_sizes;
      const nAct = branches[0] + branches[1] + branches[2];
      const online = new Float32Array(P);
      expect(l.fh_trainer_get_params(h, 0, online, P)).toBe(FhStatus.OK);
      const r = rng(5);
      const target = online.map((x) => (x === 0 ? 0 : x * (0.7 + 0.6 * r()))); // a different target net
      expect(l.fh_trainer_set_params(h, 1, target, P)).toBe(FhStatus.OK);
      const B = 24;
      const b = randomBatch(B, D, branches, 6);
      const qS = qValues(l, h, online, b.obs, B, nAct);
      const qNextOnline = qValues(l, h, online, b.next, B, nAct);
      const qNextTarget = qValues(l, h, target, b.next, B, nAct);
      expect(l.fh_trainer_set_params(h, 0, online, P)).toBe(FhStatus.OK);

      const loss: [number] = [0];
      const td = new Float32Array(B);
      expect(l.fh_trainer_loss_grad(h, B, b.obs, b.act, b.ret, b.disc, b.next, b.w, loss, null, td)).toBe(FhStatus.OK);
      let total = 0;
      let sawHuberTail = false;
      for (let i = 0; i < B; i++) {
        let off = 0;
        let sum = 0;
        for (let d = 0; d < 3; d++) {
          const n = branches[d] as number;
          const on = Array.from(qNextOnline.subarray(i * nAct + off, i * nAct + off + n));
          sum += qNextTarget[i * nAct + off + argmax(on)] as number;
          off += n;
        }
        const y = (b.ret[i] as number) + (b.disc[i] as number) * (sum / 3);
        off = 0;
        let li = 0;
        let sig = 0;
        for (let d = 0; d < 3; d++) {
          const delta = (qS[i * nAct + off + (b.act[3 * i + d] as number)] as number) - y;
          if (Math.abs(delta) > 1) sawHuberTail = true;
          li += huber(delta, 1);
          sig += Math.abs(delta);
          off += branches[d] as number;
        }
        expect(Math.abs((td[i] as number) - sig)).toBeLessThan(1e-4 * (1 + sig));
        total += (b.w[i] as number) * (li / 3);
      }
      total /= B;
      expect(Math.abs(loss[0] - total)).toBeLessThan(1e-5 * (1 + total));
      expect(sawHuberTail).toBe(true);
    });
  });

  test('C51: projected mean target distribution and cross-entropy match the reference (head biases only)', () => {
    const atoms = 11;
    const vmin = -3;
    const vmax = 3;
    const cfg = tinyConfig(['env.window=2', 'agent.hidden1=8', 'agent.hidden2=8', 'agent.head_hidden=4',
      `agent.atoms=${atoms}`, `agent.v_min=${vmin}`, `agent.v_max=${vmax}`]);
    withCpuTrainer(cfg, ({ l, h, D, P }) => {
      const branches = cfg.env.branch_sizes;
      const L = layout(D, 8, 8, 4, atoms, branches);
      expect(L.total).toBe(P); // the layout contract of DESIGN §5
      // every weight 0, so hidden units are 0 and each head's output is its bias: logits are known
      const r = rng(12);
      const mk = (): Float32Array => {
        const p = new Float32Array(P);
        for (let k = 0; k < 4; k++) for (let j = 0; j < (L.out[k] as number); j++) p[(L.bO[k] as number) + j] = (r() - 0.5) * 3;
        return p;
      };
      const online = mk();
      const target = mk();
      expect(l.fh_trainer_set_params(h, 0, online, P)).toBe(FhStatus.OK);
      expect(l.fh_trainer_set_params(h, 1, target, P)).toBe(FhStatus.OK);
      const logits = (p: Float32Array, d: number, a: number): number[] => {
        const n = branches[d] as number;
        const V = p.subarray(L.bO[0] as number);
        const Adv = p.subarray(L.bO[d + 1] as number);
        return Array.from({ length: atoms }, (_, z) => {
          let mean = 0;
          for (let k = 0; k < n; k++) mean += Adv[k * atoms + z] as number;
          return (V[z] as number) + (Adv[a * atoms + z] as number) - mean / n;
        });
      };
      const support = Array.from({ length: atoms }, (_, j) => vmin + (j * (vmax - vmin)) / (atoms - 1));
      const expQ = (lg: number[]): number => softmax(lg).reduce((s, pz, j) => s + pz * (support[j] as number), 0);

      const B = 10;
      const b = randomBatch(B, D, branches, 13);
      const loss: [number] = [0];
      const td = new Float32Array(B);
      expect(l.fh_trainer_loss_grad(h, B, b.obs, b.act, b.ret, b.disc, b.next, b.w, loss, null, td)).toBe(FhStatus.OK);
      let total = 0;
      for (let i = 0; i < B; i++) {
        const mean = new Array<number>(atoms).fill(0);
        for (let d = 0; d < 3; d++) {
          const qs = Array.from({ length: branches[d] as number }, (_, a) => expQ(logits(online, d, a)));
          const pt = softmax(logits(target, d, argmax(qs)));
          pt.forEach((v, z) => (mean[z] = (mean[z] as number) + v / 3));
        }
        const m = project(mean, b.ret[i] as number, b.disc[i] as number, vmin, vmax);
        let ce = 0;
        for (let d = 0; d < 3; d++) {
          const lp = softmax(logits(online, d, b.act[3 * i + d] as number)).map(Math.log);
          ce -= m.reduce((s, mz, z) => s + mz * (lp[z] as number), 0);
        }
        expect(Math.abs((td[i] as number) - ce)).toBeLessThan(1e-4 * (1 + ce));
        total += ((b.w[i] as number) * ce) / 3;
      }
      total /= B;
      expect(Math.abs(loss[0] - total)).toBeLessThan(1e-5 * (1 + total));
    });
  });
});
