"""Entropy coding of quantised weights (symkit.pacbayes.coding): throughput, and the real coded size against the
thesis's ``ceil(d H) + 2`` and a Huffman code.

Not a ``bench_*`` script of its own: ``bench_pacbayes.py`` calls :func:`coding_table` (and may call
:func:`overhead_table`); ``python benchmarks/pacbayes_coding.py [--quick] [--device ...]`` prints both. The coder is
numpy and constriction code, so everything measured here runs on the CPU: ``--device`` is taken like every
benchmark's, checked, and changes nothing.

* :func:`coding_table`: the codes of ``d`` N(0, 1) weights under a uniform-initialised ``L``-level quantiser
  (``symkit.pacbayes.Quantizer``), ``d`` in {1e3, 1e4, 1e5, 1e6} (``quick``: up to 1e5), ``L`` in {7, 50}.
  ``encode``/``decode`` are symbols per second through :func:`arithmetic_encode` / :func:`arithmetic_decode`
  (argument checks and counting included) and MB/s of compressed payload (1 MB = 1e6 bytes) produced or consumed;
  the median of the repeats (1 in ``quick``, else 5), one thread. ``real - ideal`` is the real payload minus
  ``ceil(d H) + 2``.
* :func:`overhead_table`: ``bits - ceil(d H)`` for constriction's ANS coder (the one symkit uses) and its range
  coder (``queue``; its size with the trailing zero bits of the last word dropped, and in whole words), over
  uniform, geometric, Dirichlet(0.3) and one-dominant-level frequencies, ``L`` in {2, 3, 7, 16, 50}, shuffled
  sequences: the measurements behind the module docstring of ``symkit.pacbayes.coding``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import constriction
import numpy as np
import torch

import benchcommon as bc
from symkit.pacbayes.coding import arithmetic_decode, arithmetic_encode, entropy_bits, huffman_bits
from symkit.pacbayes.quantize import Quantizer


def _gaussian_codes(d: int, levels: int, seed: int = 0) -> np.ndarray:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    return Quantizer(levels).initialize(w, "uniform").codes(w).numpy()


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: the first line of each table: where its work runs
ON_CPU = "on the CPU whatever --device"


def coding_table(quick: bool) -> str:
    """Throughput and size of the coder on quantised Gaussian weights (module docstring), as a text table with its
    title."""
    sizes = (10**3, 10**4, 10**5) if quick else (10**3, 10**4, 10**5, 10**6)
    repeats = 1 if quick else 5
    lines = [f"entropy coding of quantised N(0,1) weights (ANS coder, constriction; {ON_CPU})",
             f"{'d':>8} {'L':>3} {'H bits/sym':>10} {'encode sym/s':>13} {'MB/s':>7} {'decode sym/s':>13} "
             f"{'MB/s':>7} {'real bits':>10} {'ceil(dH)+2':>10} {'real-ideal':>10} {'Huffman':>10}"]
    for d in sizes:
        for levels in (7, 50):
            codes = _gaussian_codes(d, levels)
            message = arithmetic_encode(codes, levels)
            assert np.array_equal(arithmetic_decode(message), codes)
            t_enc = _median_seconds(lambda codes=codes, levels=levels: arithmetic_encode(codes, levels), repeats)
            t_dec = _median_seconds(lambda message=message: arithmetic_decode(message), repeats)
            ideal = entropy_bits(codes) + 2
            mb = message.bits / 8e6
            h = (ideal - 2) / d
            lines.append(f"{d:>8} {levels:>3} {h:>10.3f} {d / t_enc:>13.3g} {mb / t_enc:>7.2f} {d / t_dec:>13.3g} "
                         f"{mb / t_dec:>7.2f} {message.bits:>10} {ideal:>10} {message.bits - ideal:>10} "
                         f"{huffman_bits(codes):>10}")
    return "\n".join(lines)


def _frequencies(kind: str, levels: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        p = np.ones(levels)
    elif kind == "geometric":
        p = 0.5 ** np.arange(levels)
    elif kind == "dirichlet":
        p = rng.dirichlet(np.full(levels, 0.3))
    else:  # one dominant level
        p = np.r_[1e3 * levels, np.ones(levels - 1)]
    return p / p.sum()


def _range_bits(symbols: np.ndarray) -> tuple[int, int]:
    counts = np.bincount(symbols)
    used = np.flatnonzero(counts)
    if used.size <= 1:
        return 0, 0
    compact = np.zeros(counts.size, dtype=np.int32)
    compact[used] = np.arange(used.size, dtype=np.int32)
    model = constriction.stream.model.Categorical(counts[used].astype(np.float64), perfect=False)
    encoder = constriction.stream.queue.RangeEncoder()
    encoder.encode(compact[symbols], model)
    words = encoder.get_compressed()
    decoder = constriction.stream.queue.RangeDecoder(words)
    assert np.array_equal(used[decoder.decode(model, symbols.size)], symbols)
    last = int(words[-1])
    trailing = (last & -last).bit_length() - 1 if last else 32
    return 32 * len(words) - trailing, 32 * len(words)


def overhead_table(quick: bool) -> str:
    """``bits - ceil(d H)`` of the ANS coder (symkit's) and of the range coder, min and max over the frequency
    kinds, ``L`` and seeds (module docstring), per ``d``, as a text table with its title."""
    rng = np.random.default_rng(0)
    seeds = 2 if quick else 6
    lines = [f"bits - ceil(d H): ANS (symkit) vs range coder, shuffled sequences ({ON_CPU})",
             f"{'d':>7} {'cases':>6} {'ANS min':>8} {'ANS max':>8} {'range min':>10} {'range max':>10} "
             f"{'range words max':>15}"]
    for d in (100, 1000, 10**4, 10**5):
        ans, trimmed, whole = [], [], []
        for levels in (2, 3, 7, 16, 50):
            for kind in ("uniform", "geometric", "dirichlet", "dominant"):
                for _ in range(seeds if d < 10**5 else 1):
                    x = rng.choice(levels, size=d, p=_frequencies(kind, levels, rng))
                    if np.count_nonzero(np.bincount(x)) <= 1:
                        continue
                    ideal = entropy_bits(x)
                    ans.append(arithmetic_encode(x, levels).bits - ideal)
                    t, w = _range_bits(x)
                    trimmed.append(t - ideal)
                    whole.append(w - ideal)
        lines.append(f"{d:>7} {len(ans):>6} {min(ans):>8} {max(ans):>8} {min(trimmed):>10} {max(trimmed):>10} "
                     f"{max(whole):>15}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    bc.add_device_option(parser, cpu_only="all of this benchmark (numpy, constriction)")
    args = parser.parse_args()
    bc.device_of(args)
    torch.set_num_threads(1)
    print(coding_table(args.quick))
    print()
    print(overhead_table(args.quick))


if __name__ == "__main__":
    main()
