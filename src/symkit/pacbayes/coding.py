"""Entropy coding of the quantised weights and the length of the message (thesis §5.3, §5.4.2, Algorithm 2).

The codes ``q(i)`` of the ``d`` quantised weights are sent with a static model of their empirical frequencies
``p_k = n_k / d``; the counts ``n_k`` are part of the message, so the decoder rebuilds the same model. §5.4.2 bounds
the coded size by ``ceil(d H(p)) + 2`` bits; :func:`message_length` adds the float16 codebook and the counts:
``l(w) <= ceil(d H(p)) + 2 + L (16 + ceil(log2 d))`` (``coder="ideal"``), or uses the real coded size
(``coder="arithmetic"``).

**The coder.** :func:`arithmetic_encode` uses the asymmetric-numeral-systems coder of ``constriction``
(``constriction.stream.stack.AnsCoder``, 32-bit words, 24-bit probabilities, ``Categorical(perfect=False)``), a
stack-based member of the arithmetic-coding family with the same rate. It is the shorter of constriction's two exact
coders: over 336 shuffled sequences with uniform, geometric, Dirichlet(0.3) and one-dominant-level frequencies,
``d`` from 100 to 1e5 and ``L`` from 2 to 50 (``overhead_table`` in ``benchmarks/pacbayes_coding.py``), its size
exceeds ``ceil(d H)`` by 4 to 22 bits, the range coder's (``constriction.stream.queue``) by -4 to 44 bits with the
trailing zero bits of its last word dropped, and its size is only known to the bit that way. The ANS size is exact:
:attr:`EncodedMessage.bits` (constriction's ``num_valid_bits``) is the length of :meth:`EncodedMessage.to_bits`,
from which :meth:`EncodedMessage.from_bits` restores the message. Only the levels that occur enter the model (the
counts say which), and a message with at most one distinct symbol has an empty payload.

**Overhead.** The tests assert ``0 <= bits - ceil(d H(p)) <= 24`` on shuffled sequences (measured: 4 to 22). The
first symbol pushed on the coder's empty stack costs up to 24 bits, the probability precision, instead of
``-log2 p``. The thesis's ``+ 2`` is the textbook arithmetic coder's termination; the real coder pays 4 to 22 bits
(20 in the 2,992-bit example below, 0.7% of its 2,808 payload bits). A message is not bounded below by ``d H`` one
sequence at a time: the empty stack decodes to the first level that occurs, so a run of that level at the end of
the sequence is free (``[1] * 500 + [0] * 500`` takes about 520 bits, ``ceil(d H) = 1000``). It is still a valid
prefix code given ``d`` (which the hyperparameter bits send), and the bound uses the real length.

**Counts.** The thesis charges ``ceil(log2 d)`` bits a count, as here. A count ranges over ``0..d``, which needs one
bit more when ``d`` is a power of two; the decoder knows ``d``, so the last count is implied, which saves more than
that whenever ``ceil(log2 d) >= L - 1``.

Empty input: an empty sequence is a 0-bit message that round-trips (and has 0 entropy and Huffman bits);
:func:`message_length` rejects it (a model with no weights has nothing to code and ``log2 d`` is undefined).

:func:`prefix_code_bits` (``l + 2 log2 l``, the KL of a point mass under the universal prior, §5.3) and
:func:`hyperparameter_bits` (App. A.4.2) are :mod:`symkit.pacbayes.bounds`'s, here beside the message they complete.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any

import constriction
import numpy as np
import torch

from symkit._checks import check_int
from symkit.pacbayes.bounds import hyperparameter_bits, point_mass_kl_bits

__all__ = [
    "EncodedMessage",
    "MessageLength",
    "arithmetic_decode",
    "arithmetic_encode",
    "entropy_bits",
    "huffman_bits",
    "hyperparameter_bits",
    "message_length",
    "prefix_code_bits",
]

_CODERS = ("ideal", "arithmetic")


# ---------------------------------------------------------------------------------------------- symbols
def _as_symbols(symbols: Any, what: str = "symbols") -> np.ndarray:
    """``symbols`` as a flat int64 array of values >= 0; ``TypeError`` for a non-integer array, ``ValueError`` for
    a negative value."""
    if isinstance(symbols, torch.Tensor):
        if symbols.is_floating_point() or symbols.is_complex() or symbols.dtype == torch.bool:
            raise TypeError(f"{what}: expected integer symbols, got a {symbols.dtype} tensor")
        if symbols.device.type == "meta":
            raise ValueError(f"{what}: a meta tensor has no values to code")
        symbols = symbols.detach().cpu().numpy()
    a = np.asarray(symbols)
    if a.size == 0:
        if a.dtype.kind not in "iuf":  # an empty list is float64 to numpy: let it through
            raise TypeError(f"{what}: expected integer symbols, got dtype {a.dtype}")
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what}: expected integer symbols, got dtype {a.dtype}")
    if a.dtype == np.uint64 and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{what}: symbol {int(a.max())} is too large")
    a = a.astype(np.int64, copy=False).reshape(-1)
    if int(a.min()) < 0:
        raise ValueError(f"{what}: symbols must be >= 0, got {int(a.min())}")
    return a


def _counts(a: np.ndarray, num_symbols: int | None = None, what: str = "symbols") -> np.ndarray:
    """The counts ``n_k`` of the checked symbols ``a`` (:func:`_as_symbols`) over ``num_symbols`` symbols."""
    top = int(a.max()) + 1 if a.size else 0
    if num_symbols is None:
        num_symbols = top
    num_symbols = check_int("num_symbols", num_symbols, 0)
    if top > num_symbols:
        raise ValueError(f"{what}: symbol {top - 1} is out of range for num_symbols={num_symbols}")
    return np.bincount(a, minlength=num_symbols).astype(np.int64)


# ---------------------------------------------------------------------------------------------- ceil(d H(p))
def _factor(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1 if p == 2 else 2
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _is_exactly(d: int, counts: list[int], k: int) -> bool:
    """Whether ``d H(p) = d log2 d - sum_k n_k log2 n_k`` is exactly the integer ``k``, i.e. ``d^d = 2^k prod n^n``,
    from the prime factors of ``d`` (a count with a prime that ``d`` lacks rules equality out)."""
    primes = _factor(d)
    exponent = {p: d * e for p, e in primes.items()}  # the prime exponents of d^d / prod n^n
    for n in counts:
        rest = n
        for p in primes:
            e = 0
            while rest % p == 0:
                rest //= p
                e += 1
            exponent[p] -= n * e
        if rest != 1:
            return False
    return exponent.pop(2, 0) == k and all(e == 0 for e in exponent.values())


def _ceil_entropy_bits(counts: np.ndarray) -> int:
    """``ceil(d H(p))`` for the empirical ``p = n / d``, exactly: the float sum decides unless it is within its own
    rounding error of an integer ``k``; then the prime factors decide whether ``d H = k`` and, if not, 60-digit
    decimal logarithms decide the side."""
    c = [int(n) for n in counts if n > 0]
    if len(c) <= 1:
        return 0
    d = sum(c)
    scale = d * math.log2(d)
    value = math.fsum([scale] + [-n * math.log2(n) for n in c])
    k = round(value)
    if abs(value - k) > 1e-9 * scale:  # the float terms are within ~1e-15 of scale of the truth
        return math.ceil(value)
    if _is_exactly(d, c, k):
        return k
    with localcontext() as ctx:
        ctx.prec = 60
        exact = (Decimal(d) * Decimal(d).ln() - sum(Decimal(n) * Decimal(n).ln() for n in c)) / Decimal(2).ln()
        return int(exact.to_integral_value(rounding=ROUND_CEILING))


def entropy_bits(symbols: Any) -> int:
    """``ceil(d H(p))`` bits, ``H(p) = -sum_k p_k log2 p_k`` with the empirical frequencies ``p`` of the ``d``
    symbols (§5.4.2: the arithmetic-code size without its 2 bits of termination). Exact, also when ``d H`` is an
    integer (``[0, 1] * 500`` gives 1000). 0 for an empty or constant sequence."""
    return _ceil_entropy_bits(_counts(_as_symbols(symbols)))


def huffman_bits(symbols: Any) -> int:
    """The size in bits of a Huffman code of the symbols with their empirical frequencies (the code table not
    counted), for the thesis's comparison (§5.4.2): Huffman spends at least one bit a symbol, so for few, skewed
    levels it is well above ``d H(p)``, which arithmetic coding reaches. 0 for at most one distinct symbol (the
    counts say everything), as for the arithmetic code."""
    heap = [int(n) for n in _counts(_as_symbols(symbols)) if n > 0]
    if len(heap) <= 1:
        return 0
    heapq.heapify(heap)
    total = 0  # sum_k n_k len_k is the sum of the weights of the merged (inner) nodes
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        total += merged
        heapq.heappush(heap, merged)
    return total


# ---------------------------------------------------------------------------------------------- the coder
@dataclass(frozen=True, eq=False)
class EncodedMessage:
    """An entropy-coded sequence (:func:`arithmetic_encode`): ``words``, the coder's compressed ``uint32`` words
    (the ANS stack, least significant word first); ``counts``, ``n_k`` for each of the ``num_symbols`` symbols (the
    static model, sent beside the payload); ``length``, the number ``d`` of symbols (``counts.sum()``)."""

    words: np.ndarray
    counts: np.ndarray
    length: int

    @property
    def num_symbols(self) -> int:
        """The alphabet size ``L`` (``len(counts)``)."""
        return len(self.counts)

    @property
    def bits(self) -> int:
        """The real size of the payload in bits: the stack as one integer has a leading 1 (the top word is never
        0), which a decoder that knows the counts restores, so the payload is the bits below it (constriction's
        ``num_valid_bits``; :meth:`to_bits` has exactly this length)."""
        if len(self.words) == 0:
            return 0
        return 32 * (len(self.words) - 1) + int(self.words[-1]).bit_length() - 1

    def to_bits(self) -> np.ndarray:
        """The payload as a 0/1 ``uint8`` array of length :attr:`bits` (least significant bit first)."""
        raw = np.unpackbits(np.asarray(self.words, dtype="<u4").view(np.uint8), bitorder="little")
        return raw[: self.bits]

    @classmethod
    def from_bits(cls, bits: np.ndarray, counts: np.ndarray) -> EncodedMessage:
        """The message from its payload bits (:meth:`to_bits`) and its counts: with two or more distinct symbols
        the stack is not empty, so its leading 1 is restored above the payload; otherwise the payload is empty."""
        bits = np.asarray(bits, dtype=np.uint8).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if np.count_nonzero(counts) <= 1:
            if bits.size:
                raise ValueError("from_bits: a message with at most one distinct symbol has an empty payload")
            return cls(np.zeros(0, dtype=np.uint32), counts, int(counts.sum()))
        n = bits.size
        full = np.zeros(32 * (n // 32 + 1), dtype=np.uint8)
        full[:n] = bits
        full[n] = 1
        words = np.packbits(full, bitorder="little").view("<u4").astype(np.uint32)
        return cls(words, counts, int(counts.sum()))


def _model(used_counts: np.ndarray) -> Any:
    return constriction.stream.model.Categorical(used_counts.astype(np.float64), perfect=False)


def arithmetic_encode(symbols: Any, num_symbols: int | None = None) -> EncodedMessage:
    """Entropy-code ``symbols`` (integers in ``0..num_symbols - 1``, any shape, flattened in C order; a numpy array,
    a sequence or an integer tensor) with the static model of their empirical frequencies (§5.4.2; the coder is
    chosen in the module docstring). ``num_symbols`` defaults to ``max + 1``. The round trip
    :func:`arithmetic_decode` is exact. ``TypeError`` for non-integer symbols, ``ValueError`` for a negative one or
    one ``>= num_symbols``; an empty sequence is an empty message."""
    a = _as_symbols(symbols)
    counts = _counts(a, num_symbols)
    used = np.flatnonzero(counts)
    if used.size <= 1:
        return EncodedMessage(np.zeros(0, dtype=np.uint32), counts, int(a.size))
    compact = np.zeros(counts.size, dtype=np.int32)
    compact[used] = np.arange(used.size, dtype=np.int32)  # only the symbols that occur enter the model
    coder = constriction.stream.stack.AnsCoder()
    coder.encode_reverse(compact[a], _model(counts[used]))
    return EncodedMessage(coder.get_compressed(), counts, int(a.size))


def arithmetic_decode(message: EncodedMessage) -> np.ndarray:
    """The symbols of :func:`arithmetic_encode`'s ``message``, as a 1-D int64 array. ``ValueError`` if the payload
    does not decode to exactly ``message.length`` symbols."""
    if not isinstance(message, EncodedMessage):
        raise TypeError(f"arithmetic_decode: expected an EncodedMessage, got {type(message).__name__}")
    counts = np.asarray(message.counts, dtype=np.int64)
    if int(counts.sum()) != message.length or (counts < 0).any():
        raise ValueError(f"arithmetic_decode: the counts sum to {int(counts.sum())}, not length={message.length}")
    used = np.flatnonzero(counts)
    if used.size <= 1:
        if len(message.words):
            raise ValueError("arithmetic_decode: a message with at most one distinct symbol has an empty payload")
        return np.full(message.length, used[0] if used.size else 0, dtype=np.int64)
    coder = constriction.stream.stack.AnsCoder(np.asarray(message.words, dtype=np.uint32))
    compact = coder.decode(_model(counts[used]), message.length)
    if not coder.is_empty():
        raise ValueError("arithmetic_decode: the payload holds more than the message's symbols")
    decoded = used[compact]
    if not np.array_equal(np.bincount(decoded, minlength=counts.size), counts):
        raise ValueError("arithmetic_decode: the payload does not decode to the message's counts")
    return decoded


# ---------------------------------------------------------------------------------------------- the message
@dataclass(frozen=True)
class MessageLength:
    """The parts of a quantised model's message in bits (§5.4.2): ``payload_bits``, the coded symbols;
    ``codebook_bits``, the ``L`` levels (16 bits each in float16 by default); ``counts_bits``, the ``L`` counts
    (``ceil(log2 d)`` each); ``total_bits``, their sum; ``coder``, ``"ideal"`` or ``"arithmetic"``."""

    payload_bits: int
    codebook_bits: int
    counts_bits: int
    coder: str
    total_bits: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_bits", self.payload_bits + self.codebook_bits + self.counts_bits)


def message_length(codes: Any, codebook_size: int, *, codebook_bits: int = 16, coder: str = "ideal") -> MessageLength:
    """The length of the message of ``d`` codes in ``0..L-1`` (``L = codebook_size``) with a codebook of
    ``codebook_bits`` bits a level (§5.4.2):

    ``l(w) = payload + L codebook_bits + L ceil(log2 d)``,

    the payload being the thesis's ``ceil(d H(p)) + 2`` for ``coder="ideal"`` and the real size of
    :func:`arithmetic_encode`'s payload for ``coder="arithmetic"``. ``d = 1000``, ``L = 7`` and uniform
    frequencies give 2808 + 2 + 7 (16 + 10) = 2992 bits. ``ValueError`` for no codes (``log2 d`` is undefined)."""
    if coder not in _CODERS:
        raise ValueError(f"coder must be one of {_CODERS}, got {coder!r}")
    levels = check_int("codebook_size", codebook_size, 1)
    per_level = check_int("codebook_bits", codebook_bits, 0)
    a = _as_symbols(codes, "codes")
    if a.size == 0:
        raise ValueError("message_length: no codes; a model with no weights has no message to bound")
    counts = _counts(a, levels, "codes")
    if coder == "ideal":
        payload = _ceil_entropy_bits(counts) + 2
    else:
        payload = arithmetic_encode(a, levels).bits
    d = int(a.size)
    return MessageLength(payload_bits=payload, codebook_bits=levels * per_level,
                         counts_bits=levels * (d - 1).bit_length(), coder=coder)  # ceil(log2 d)


def prefix_code_bits(message_bits: float) -> float:
    """``l + 2 log2 l``: the KL in bits of a point mass at a hypothesis with an ``l``-bit message under the universal
    prior (§5.3; the ``2 log2 l`` bits make the message self-delimiting). The same function as
    :func:`symkit.pacbayes.bounds.point_mass_kl_bits` (``l = 0`` gives 0)."""
    return point_mass_kl_bits(message_bits)
