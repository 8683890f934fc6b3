/**
 * The parameter layout of DESIGN §5 (native/src/common/layout.h), rebuilt in TypeScript for tests
 * that read or write individual blocks of the flat parameter vector.
 */
export interface Layout {
  W1: number; b1: number; W2: number; b2: number; WH: number; bH: number;
  WO: number[]; bO: number[]; out: number[]; outPad: number[]; total: number;
}

const align64 = (n: number): number => Math.ceil(n / 64) * 64;
const pad8 = (n: number): number => Math.ceil(n / 8) * 8;

export function layout(D: number, h1: number, h2: number, hh: number, atoms: number, branches: readonly number[]): Layout {
  const nh = 1 + branches.length;
  let off = 0;
  const take = (n: number): number => {
    const at = off;
    off = align64(off + n);
    return at;
  };
  const W1 = take(h1 * D);
  const b1 = take(h1);
  const W2 = take(h2 * h1);
  const b2 = take(h2);
  const WH = take(nh * hh * h2);
  const bH = take(nh * hh);
  const out = [atoms, ...branches.map((n) => n * atoms)];
  const outPad = out.map(pad8);
  const WO: number[] = [];
  const bO: number[] = [];
  for (let k = 0; k < nh; k++) {
    WO.push(take((outPad[k] as number) * hh));
    bO.push(take(outPad[k] as number));
  }
  return { W1, b1, W2, b2, WH, bH, WO, bO, out, outPad, total: off };
}
