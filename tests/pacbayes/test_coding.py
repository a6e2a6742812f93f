"""Entropy coding and message lengths (thesis §5.3, §5.4.2, App. A.4.2): the exact round trip, the real size against
``ceil(d H)``, Huffman, the 2992-bit example, hyperparameter and prefix bits, and the argument checks."""

from __future__ import annotations

import math

import constriction
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symkit.pacbayes import coding
from symkit.pacbayes.bounds import point_mass_kl_bits
from symkit.pacbayes.coding import (
    EncodedMessage,
    MessageLength,
    arithmetic_decode,
    arithmetic_encode,
    entropy_bits,
    huffman_bits,
    hyperparameter_bits,
    message_length,
    prefix_code_bits,
)
from symkit.pacbayes.quantize import Quantizer


@st.composite
def sequences(draw, max_levels: int = 60, max_size: int = 300):
    levels = draw(st.integers(1, max_levels))
    symbols = draw(st.lists(st.integers(0, levels - 1), max_size=max_size))
    extra = draw(st.integers(0, 3))  # an alphabet larger than the symbols that occur
    return np.array(symbols, dtype=np.int64), levels + extra


def _float_entropy_bits(x: np.ndarray) -> float:
    counts = np.bincount(x)
    p = counts[counts > 0] / x.size
    return float(-x.size * (p * np.log2(p)).sum())


# ---------------------------------------------------------------------------------------------- round trip
@settings(max_examples=200, deadline=None)
@given(case=sequences())
def test_round_trip_is_exact(case):
    x, num_symbols = case
    message = arithmetic_encode(x, num_symbols)
    assert message.length == x.size and message.num_symbols == num_symbols
    assert np.array_equal(message.counts, np.bincount(x, minlength=num_symbols))
    decoded = arithmetic_decode(message)
    assert decoded.dtype == np.int64 and np.array_equal(decoded, x)
    bits = message.to_bits()  # the payload is exactly message.bits bits: the message comes back from them
    assert bits.size == message.bits
    again = EncodedMessage.from_bits(bits, message.counts)
    assert np.array_equal(again.words, message.words) and np.array_equal(arithmetic_decode(again), x)


@settings(max_examples=100, deadline=None)
@given(case=sequences(max_levels=8, max_size=120))
def test_huffman_is_between_the_entropy_and_one_bit_a_symbol_above(case):
    x, _ = case
    h = _float_entropy_bits(x) if x.size else 0.0
    assert entropy_bits(x) <= huffman_bits(x)  # Shannon: no prefix code beats d H
    assert huffman_bits(x) < h + x.size or huffman_bits(x) == 0  # Huffman's redundancy is below one bit a symbol


def test_bits_are_constriction_valid_bits():
    rng = np.random.default_rng(0)
    for d, levels in ((3, 2), (100, 7), (5000, 50)):
        x = rng.permutation(np.r_[np.arange(levels), rng.integers(0, levels, d)])  # every level occurs
        model = constriction.stream.model.Categorical(np.bincount(x).astype(np.float64), perfect=False)
        coder = constriction.stream.stack.AnsCoder()
        coder.encode_reverse(x.astype(np.int32), model)
        assert arithmetic_encode(x).bits == coder.num_valid_bits()


def test_inputs_of_any_integer_kind_and_shape():
    x = np.arange(12).reshape(3, 4) % 5
    for form in (x, x.tolist(), x.astype(np.uint8), x.astype(np.int32), torch.from_numpy(x)):
        message = arithmetic_encode(form)
        assert message.num_symbols == 5 and np.array_equal(arithmetic_decode(message), x.reshape(-1))


def test_empty_and_constant_messages():
    for empty in ([], np.zeros(0, dtype=np.int64), torch.zeros(0, dtype=torch.long)):
        message = arithmetic_encode(empty)
        assert message.bits == 0 and message.length == 0 and arithmetic_decode(message).size == 0
    assert entropy_bits([]) == huffman_bits([]) == 0
    message = arithmetic_encode([4, 4, 4], 6)
    assert message.bits == 0 and arithmetic_decode(message).tolist() == [4, 4, 4]
    assert entropy_bits([4, 4, 4]) == huffman_bits([4, 4, 4]) == 0


# ---------------------------------------------------------------------------------------------- sizes
def test_entropy_bits_is_exact_when_d_h_is_an_integer():
    assert entropy_bits([0, 1] * 500) == 1000
    assert entropy_bits([0] * 4 + [1] * 4) == 8
    assert entropy_bits([0, 0, 1, 2]) == 6  # H = 1.5
    assert entropy_bits([0, 1, 2, 3] * 256) == 2048
    assert entropy_bits([0] * 768 + [1] * 256) == math.ceil(1024 * (2 - 0.75 * math.log2(3)))
    assert coding._is_exactly(1000, [500, 500], 1000) and not coding._is_exactly(1000, [500, 500], 999)
    assert coding._is_exactly(12, [3, 3, 3, 3], 24) and not coding._is_exactly(6, [2, 2, 2], 9)  # 6 log2 3
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.integers(0, rng.integers(2, 30), rng.integers(2, 3000))
        assert entropy_bits(x) == math.ceil(_float_entropy_bits(x) - 1e-9)


def test_real_size_is_within_24_bits_above_the_entropy():
    """The bound the module docstring states: 0 <= bits - ceil(d H) <= 24 on shuffled sequences."""
    rng = np.random.default_rng(2)
    excess = []
    for d in (100, 1000, 10_000, 100_000):
        for levels in (2, 7, 50):
            for p in (np.ones(levels), 0.5 ** np.arange(levels), rng.dirichlet(np.full(levels, 0.3))):
                x = rng.choice(levels, size=d, p=p / p.sum())
                if np.count_nonzero(np.bincount(x)) > 1:
                    excess.append(arithmetic_encode(x, levels).bits - entropy_bits(x))
    assert 0 <= min(excess) and max(excess) <= 24


def test_a_final_run_of_the_first_level_is_free():
    """Documented: the coder's empty stack decodes to the first level, so one sequence may beat ceil(d H)."""
    x = np.array([1] * 500 + [0] * 500)
    assert arithmetic_encode(x).bits < entropy_bits(x) == 1000
    assert np.array_equal(arithmetic_decode(arithmetic_encode(x)), x)


def test_arithmetic_coding_beats_huffman_for_few_skewed_levels():
    rng = np.random.default_rng(3)
    p = np.array([0.9, 0.05, 0.02, 0.01, 0.01, 0.005, 0.005])
    x = rng.choice(7, size=10_000, p=p)
    huffman = huffman_bits(x)
    assert huffman >= x.size  # at least one bit a symbol
    assert huffman >= entropy_bits(x) + 2  # Huffman >= the ideal arithmetic code, ceil(d H) + 2
    assert arithmetic_encode(x, 7).bits < 0.7 * huffman  # and the real one: H(p) is ~0.6 bits a symbol
    assert huffman_bits([0, 1, 2, 2, 3, 3, 3, 3]) == 14  # code lengths 3, 3, 2, 1


def test_the_2992_bit_example():
    """§6 item 19: d = 1000, L = 7, uniform frequencies: ceil(1000 log2 7) + 7 (16 + 10) + 2 = 2992."""
    x = np.repeat(np.arange(7), [143] * 6 + [142])
    np.random.default_rng(4).shuffle(x)
    assert entropy_bits(x) == math.ceil(1000 * math.log2(7)) == 2808
    ideal = message_length(x, 7)
    assert ideal == MessageLength(payload_bits=2810, codebook_bits=112, counts_bits=70, coder="ideal")
    assert ideal.total_bits == 2992
    real = message_length(x, 7, coder="arithmetic")
    assert real.payload_bits == arithmetic_encode(x, 7).bits and real.total_bits == real.payload_bits + 182
    assert 2808 <= real.payload_bits <= 2808 + 24
    assert message_length(x, 7, codebook_bits=32).codebook_bits == 224
    assert message_length(x, 9).counts_bits == 90  # unused levels are paid for too


def test_counts_bits_are_ceil_log2_d():
    for d, per_count in ((1, 0), (2, 1), (1000, 10), (1024, 10), (1025, 11)):
        assert message_length(np.zeros(d, dtype=np.int64), 3).counts_bits == 3 * per_count


def test_hyperparameter_and_prefix_bits():
    assert hyperparameter_bits(2, 2, 2) == 3.0
    assert hyperparameter_bits(4, 18, 5, 2) == pytest.approx(math.log2(720)) and round(math.log2(720), 2) == 9.49
    assert hyperparameter_bits() == 0.0
    assert prefix_code_bits(1024) == 1044.0
    for bits in (1, 2992, 3113.5):
        assert prefix_code_bits(bits) == bits + 2 * math.log2(bits) == point_mass_kl_bits(bits)
    with pytest.raises(ValueError):
        hyperparameter_bits(0)


def test_decoded_message_is_the_quantised_model():
    """End to end: the codes of a trained quantiser, coded and decoded, with the float16 codebook, give back the
    quantised weights exactly."""
    torch.manual_seed(0)
    w = torch.randn(2000, dtype=torch.float64)
    q = Quantizer(7).to(torch.float64).initialize(w, "kmeans")
    codes = q.codes(w)
    message = arithmetic_encode(codes, q.levels)
    decoded = torch.from_numpy(arithmetic_decode(message))
    assert torch.equal(q.codebook_fp16().double()[decoded], q(w))
    assert message_length(codes, q.levels, coder="arithmetic").payload_bits == message.bits


# ---------------------------------------------------------------------------------------------- checks
def test_argument_errors():
    with pytest.raises(ValueError, match=">= 0"):
        arithmetic_encode([0, -1])
    with pytest.raises(ValueError, match="out of range"):
        arithmetic_encode([0, 3], 3)
    for bad in (np.array([0.0, 1.0]), [0.5], np.array([True, False]), torch.tensor([1.0]),
                torch.tensor([True])):
        with pytest.raises(TypeError, match="integer"):
            arithmetic_encode(bad)
    with pytest.raises(ValueError, match="meta"):
        arithmetic_encode(torch.zeros(3, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError):
        arithmetic_encode([0, 1], 2.0)
    with pytest.raises(ValueError):
        arithmetic_encode([0, 1], -1)
    with pytest.raises(TypeError):
        arithmetic_decode([1, 2, 3])
    with pytest.raises(ValueError, match="no codes"):
        message_length([], 3)
    with pytest.raises(ValueError, match="coder"):
        message_length([0, 1], 2, coder="huffman")
    with pytest.raises(ValueError, match="out of range"):
        message_length([0, 7], 7)
    with pytest.raises(ValueError):
        message_length([0, 1], 0)
    with pytest.raises(TypeError):
        entropy_bits([0.5, 1.5])
    with pytest.raises(ValueError):
        huffman_bits([-2])


def test_inconsistent_messages_are_rejected():
    message = arithmetic_encode(np.arange(100) % 3)
    with pytest.raises(ValueError, match="sum"):
        arithmetic_decode(EncodedMessage(message.words, message.counts, 99))
    with pytest.raises(ValueError):
        arithmetic_decode(EncodedMessage(message.words, message.counts + np.array([1, -1, 0]), 100))
    with pytest.raises(ValueError, match="empty payload"):
        arithmetic_decode(EncodedMessage(message.words, np.array([100, 0, 0]), 100))
