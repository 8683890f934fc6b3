#!/usr/bin/env python3
"""bench/gpu/gemm_shapes.py — cuBLASLt (through PyTorch) on the train step's first-layer shapes at the reference
batch: the paired layout's two first-layer GEMMs (the s and s' runs, K 1088, 512 units each, bias + ReLU in the
epilogue) against one GEMM over the whole 1152-element block with both placed W1 copies stacked (N 1024), and the
first layer's weight gradient. Prints a table (µs per GEMM, TFLOP/s); a GPU host tool, for planning only."""
import torch

B, K, KB, H1 = 16384, 1088, 1152, 512


def timed(fn, reps=50):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) * 1e3 / reps)
    return best


def main():
    torch.manual_seed(1)
    d = dict(device="cuda", dtype=torch.bfloat16)
    xb = torch.randn(B, KB, **d)
    w1 = torch.randn(H1, K, **d) * 0.03
    w2 = torch.randn(2 * H1, KB, **d) * 0.03
    b1, b2 = torch.zeros(H1, **d), torch.zeros(2 * H1, **d)
    xs, xn = xb[:, :K], xb[:, 64:64 + K]
    dh = torch.randn(B, H1, **d)
    rows = []

    def pair():
        torch._addmm_activation(b1, xs, w1.t())
        torch._addmm_activation(b1, xn, w1.t())

    rows.append(("first layer, s and s' runs as two GEMMs (K 1088, N 512 each)", timed(pair), 2 * 2 * B * K * H1))
    rows.append(("first layer, one GEMM over the block (K 1152, N 1024)",
                 timed(lambda: torch._addmm_activation(b2, xb, w2.t())), 2 * B * KB * 2 * H1))
    rows.append(("first layer, one run (K 1088, N 512)", timed(lambda: torch._addmm_activation(b1, xs, w1.t())),
                 2 * B * K * H1))
    rows.append(("dW1 = dH1^T X_s (512 x 1088, K 16384)", timed(lambda: dh.t() @ xs), 2 * B * K * H1))
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, batch {B}")
    print("| GEMM | us | TFLOP/s |\n| --- | ---: | ---: |")
    for name, us, flops in rows:
        print(f"| {name} | {us:.1f} | {flops / us / 1e6:.0f} |")


if __name__ == "__main__":
    main()
