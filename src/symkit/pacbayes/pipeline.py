"""The compression pipeline of thesis ch. 5 (Algorithm 2, COMPUTE_BOUND): train in a random subspace, quantise with
a learned codebook, code the result, and bound the error of the decoded classifier.

:func:`compute_bound` runs the five steps on any classifier ``model`` (an ``nn.Module`` mapping a batch of inputs
to logits):

1. **subspace training** (Eq. 5.3): ``theta = theta0 + P w``, only ``w`` (``intrinsic_dim`` numbers) trained with
   the project's :class:`~symkit.train.Trainer`; ``theta0`` and ``P`` come from ``seed`` and cost nothing to send;
2. **quantisation-aware training** (Eq. 5.4): ``w`` and a codebook of ``levels`` values trained together with the
   straight-through estimator for ``quant_epochs``;
3. the **quantised training error** of the decoded model (the codebook rounded to float16, as sent);
4. the **message**: the arithmetic-coded codes, the codebook (16 bits a level), the counts
   (``ceil(log2 d)`` bits a level), the bits of every hyperparameter searched, and the float buffers of the model
   (batch-norm running statistics, 16 bits each: they are part of the classifier, so they are part of the message);
   the KL of the point mass is ``l + 2 log2 l`` (§5.3);
5. the **Catoni bound** (Thm A.3) at ``delta``, with McAllester's beside it.

:func:`pruning_bound` is the baseline of Table A.18 (iterative magnitude pruning, Han et al. 2016, then the same
quantisation and coding, plus the positions of the kept weights), and :func:`holdout_bound` the data-dependent
prior bound of §5.5.2.

Decision (the thesis is silent): batch-norm running statistics are charged to the message at 16 bits each and the
bound is computed for the model with those float16 statistics. A classifier is a function of the message alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from symkit._checks import check_int, check_number
from symkit.pacbayes.bounds import (
    catoni_bound,
    hoeffding_holdout_bound,
    mcallester_bound,
    point_mass_kl_bits,
)
from symkit.pacbayes.coding import (
    EncodedMessage,
    arithmetic_decode,
    arithmetic_encode,
    entropy_bits,
    message_length,
)
from symkit.pacbayes.quantize import Quantizer
from symkit.pacbayes.subspace import SubspaceModel
from symkit.train import Trainer, predict

__all__ = ["BoundReport", "compute_bound", "error_rate", "holdout_bound", "pruning_bound"]

Data = tuple[Tensor, Tensor]


@dataclass
class BoundReport:
    """What :func:`compute_bound` measured. Errors are fractions; sizes are bits. ``bound`` is Catoni's (the
    thesis's), ``mcallester`` McAllester's, both at ``delta``."""

    method: str
    n: int
    num_params: int
    intrinsic_dim: int
    levels: int
    train_error: float
    test_error: float | None
    quantized_train_error: float
    quantized_test_error: float | None
    payload_bits: float
    codebook_bits: float
    counts_bits: float
    buffer_bits: float
    position_bits: float
    hyperparameter_bits: float
    message_bits: float
    kl_bits: float
    bound: float
    mcallester: float
    delta: float
    seconds: float
    #: what decodes the classifier: ``message`` (the :class:`~symkit.pacbayes.coding.EncodedMessage` of the codes),
    #: ``codebook`` (float16 levels) and ``decode(message) -> classifier`` (a callable on inputs); not in
    #: :meth:`as_dict`
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The numbers (everything but ``artifacts``), for a results store."""
        return {k: v for k, v in asdict(self).items() if k != "artifacts"}

    def __str__(self) -> str:
        test = "" if self.quantized_test_error is None else f", test error {100 * self.quantized_test_error:.2f}%"
        return (f"{self.method}: train error {100 * self.quantized_train_error:.2f}%{test}, message "
                f"{self.message_bits:.0f} bits ({self.message_bits / 8192:.2f} KB), error bound "
                f"{100 * self.bound:.2f}% (Catoni, delta={self.delta})")


# ---------------------------------------------------------------------------------------------- helpers
def _check_data(name: str, data: Any) -> Data:
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, Tensor) for t in data)):
        raise TypeError(f"{name} must be a pair (x, y) of tensors, got {type(data).__name__}")
    x, y = data
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"{name}: x has {len(x)} samples and y has {len(y)}; expected the same number, at least 1")
    if y.dtype != torch.long or y.dim() != 1:
        raise ValueError(f"{name}: y must be a 1-D tensor of class indices (torch.long), got {y.dtype} "
                         f"of shape {tuple(y.shape)}")
    return x, y


@torch.no_grad()
def error_rate(model: Callable[[Tensor], Tensor] | nn.Module, data: Data, batch_size: int = 512) -> float:
    """The 0-1 error of ``model`` (logits) on ``data``; a module is put in eval mode (a plain callable is called as
    it is)."""
    x, y = data
    if isinstance(model, nn.Module):
        logits = predict(model, x, batch_size)
    else:
        logits = torch.cat([model(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    return float((logits.argmax(-1) != y.to(logits.device)).double().mean())


def _buffers_fp16_(model: nn.Module) -> int:
    """Round the float buffers (batch-norm running statistics) to float16 in place, as sent; their size in
    numbers."""
    count = 0
    with torch.no_grad():
        for b in model.buffers():
            if b.is_floating_point():
                b.copy_(b.to(torch.float16).to(b.dtype))
                count += b.numel()
    return count


class _Quantized(nn.Module):
    """The subspace model evaluated at the quantised coordinates ``Q(w)`` (straight-through gradients)."""

    def __init__(self, sub: SubspaceModel, quantizer: Quantizer) -> None:
        super().__init__()
        self.sub, self.quantizer = sub, quantizer

    def forward(self, x: Tensor) -> Tensor:
        return self.sub(x, w=self.quantizer(self.sub.w))


def _trainer(model: nn.Module, params: list[nn.Parameter], *, lr: float, epochs: int, batch_size: int, seed: int,
             desc: str, schedule: str = "constant", clip: float | None = None,
             limits: dict[str, Any] | None = None) -> Trainer:
    return Trainer(model, F.cross_entropy, params=params, lr=lr, epochs=epochs, batch_size=batch_size, seed=seed,
                   min_batch=2, desc=desc, schedule=schedule, clip=clip, **(limits or {}))


def _finish(method: str, model_eval: Callable[[Tensor], Tensor] | nn.Module, *, train: Data, test: Data | None,
            train_error: float, test_error: float | None, codes: Tensor, levels: int, num_params: int,
            intrinsic_dim: int, buffer_numbers: int, position_bits: float, hyperparameter_bits: float,
            delta: float, coder: str, t0: float, artifacts: dict[str, Any] | None = None) -> BoundReport:
    q_train = error_rate(model_eval, train)
    q_test = None if test is None else error_rate(model_eval, test)
    if codes.numel():
        length = message_length(codes.cpu().numpy(), levels, coder=coder)
        payload, codebook, counts = length.payload_bits, length.codebook_bits, length.counts_bits
    else:
        payload = codebook = counts = 0.0
    buffer_bits = 16.0 * buffer_numbers
    message = payload + codebook + counts + buffer_bits + position_bits + hyperparameter_bits
    kl = point_mass_kl_bits(message)
    n = len(train[0])
    return BoundReport(method=method, n=n, num_params=num_params, intrinsic_dim=intrinsic_dim, levels=levels,
                       train_error=train_error, test_error=test_error, quantized_train_error=q_train,
                       quantized_test_error=q_test, payload_bits=float(payload), codebook_bits=float(codebook),
                       counts_bits=float(counts), buffer_bits=buffer_bits, position_bits=float(position_bits),
                       hyperparameter_bits=float(hyperparameter_bits), message_bits=float(message), kl_bits=kl,
                       bound=catoni_bound(q_train, kl, n, delta), mcallester=mcallester_bound(q_train, kl, n, delta),
                       delta=delta, seconds=time.perf_counter() - t0, artifacts=artifacts or {})


# ---------------------------------------------------------------------------------------------- the pipeline
#: Adam's rate of :func:`compute_bound` at ``intrinsic_dim = 200`` when ``lr=None`` (scaled by ``sqrt(200 / d)``)
_LR_AT_200 = 0.5


def _default_lr(intrinsic_dim: int) -> float:
    """:func:`compute_bound`'s rate for ``lr=None``: ``0.5 sqrt(200 / intrinsic_dim)`` (unused at ``d = 0``)."""
    d = check_int("compute_bound: intrinsic_dim", intrinsic_dim, 0)
    return _LR_AT_200 * math.sqrt(200 / d) if d else _LR_AT_200


def compute_bound(model: nn.Module, train: Data, test: Data | None = None, *, intrinsic_dim: int = 200,
                  projector: str = "kron-sum", levels: int = 11, quant_init: str = "kmeans", epochs: int = 60,
                  lr: float | None = None, batch_size: int = 128, quant_epochs: int = 20, quant_lr: float = 1e-2,
                  hyperparameter_bits: float = 0.0, delta: float = 0.05, seed: int = 137,
                  theta0: Tensor | dict[str, Tensor] | None = None, coder: str = "arithmetic",
                  schedule: str = "constant", clip: float | None = 1.0,
                  precision: str = "32", max_epochs: int | None = None,
                  max_batches: int | None = None) -> BoundReport:
    """Algorithm 2 (module docstring) on ``model``; returns a :class:`BoundReport`. ``precision`` / ``max_epochs`` /
    ``max_batches`` go to every :class:`symkit.train.Trainer` it runs (a smoke run's limits).

    ``model``'s current parameters are ``theta0`` unless ``theta0`` is given (transfer from a pretrained model:
    pass its parameters; the prior is then conditional on them). ``hyperparameter_bits`` is what the search that
    chose these settings costs (:func:`~symkit.pacbayes.bounds.hyperparameter_bits`). ``coder="ideal"`` uses the
    thesis's ``ceil(d H(p)) + 2`` in place of the real arithmetic code's length. Subspace training uses Adam at
    ``lr`` with the ``schedule`` and the gradient norm clipped at ``clip``. A step moves ``theta`` by about
    ``lr sqrt(d)``, so ``lr=None`` (the default) is ``0.5 sqrt(200 / intrinsic_dim)``: the same step at every ``d``.

    The defaults are the best setting measured on the bundled digits (``SmallCNN(1, 10, width=16, norm="group")``,
    the first 1,400 images for training, one thread): a mean Catoni bound of 58.5% over five initialisations, where
    15 levels at a rate of 0.3 gave 62.0% and 100 epochs 59.5%; 30 epochs gave 67% (three initialisations); a
    cosine schedule and rates of 0.1 or 1.0 were worse; at one initialisation ``d = 100`` and ``d = 500`` gave 69%
    and 70% (59% at ``d = 200``), and ``d = 500``, ``lr=1e-2``, cosine, 30 epochs, 7 uniform levels and 30 epochs of
    QAT at ``1e-3`` gave 89%. Another data set or model may want another ``d``: sweep it and pay for the sweep with
    ``hyperparameter_bits``.
    """
    t0 = time.perf_counter()
    if not isinstance(model, nn.Module):
        raise TypeError(f"compute_bound: model must be an nn.Module, got {type(model).__name__}")
    limits = {"precision": precision, "max_epochs": max_epochs, "max_batches": max_batches}
    train = _check_data("train", train)
    test = None if test is None else _check_data("test", test)
    intrinsic_dim = check_int("compute_bound: intrinsic_dim", intrinsic_dim, 0)
    lr = _default_lr(intrinsic_dim) if lr is None else check_number("compute_bound: lr", lr, above=True)
    sub = SubspaceModel(model, intrinsic_dim, projector, seed=seed, theta0=theta0)
    if intrinsic_dim > 0:
        _trainer(sub, [sub.w], lr=lr, epochs=epochs, batch_size=batch_size, seed=seed,
                 desc=f"subspace d={intrinsic_dim}", schedule=schedule, clip=clip, limits=limits).fit(train)
    train_error = error_rate(sub, train)
    test_error = None if test is None else error_rate(sub, test)
    if intrinsic_dim == 0:  # theta0 itself: only the buffers and the hyperparameters to send
        buffers = _buffers_fp16_(sub.net)
        return _finish("subspace", sub, train=train, test=test, train_error=train_error, test_error=test_error,
                       codes=torch.zeros(0, dtype=torch.long), levels=levels, num_params=sub.num_params,
                       intrinsic_dim=0, buffer_numbers=buffers, position_bits=0.0,
                       hyperparameter_bits=hyperparameter_bits, delta=delta, coder=coder, t0=t0)
    quantizer = Quantizer(levels).to(device=sub.w.device, dtype=sub.w.dtype)
    quantizer.initialize(sub.w.detach(), init=quant_init)
    quantized = _Quantized(sub, quantizer)
    if quant_epochs > 0:
        _trainer(quantized, [sub.w, *quantizer.parameters()], lr=quant_lr, epochs=quant_epochs,
                 batch_size=batch_size, seed=seed + 1, desc="quantise", limits=limits).fit(train)
    sub.eval()  # the decoded classifier: running statistics, no updates
    codes = quantizer.codes(sub.w.detach())
    codebook = quantizer.codebook_fp16()
    w_hat = codebook.to(sub.w.dtype)[codes]
    buffers = _buffers_fp16_(sub.net)

    def decode(message: EncodedMessage) -> Callable[[Tensor], Tensor]:
        """The classifier a receiver rebuilds from the message (given the seed, the codebook and the buffers)."""
        w = codebook.to(sub.w.dtype)[torch.as_tensor(arithmetic_decode(message), device=codebook.device)]
        sub.eval()
        return lambda x: sub(x, w=w)

    artifacts = {"message": arithmetic_encode(codes.cpu().numpy(), levels), "codebook": codebook, "decode": decode,
                 "subspace": sub}
    return _finish("subspace", lambda x: sub(x, w=w_hat), train=train, test=test, train_error=train_error,
                   test_error=test_error, codes=codes, levels=levels, num_params=sub.num_params,
                   intrinsic_dim=intrinsic_dim, buffer_numbers=buffers, position_bits=0.0,
                   hyperparameter_bits=hyperparameter_bits, delta=delta, coder=coder, t0=t0, artifacts=artifacts)


def _mask_bits(mask: Tensor, coder: str) -> float:
    """The positions of the kept weights: the 0/1 mask arithmetic-coded with its empirical frequencies, plus the
    ``ceil(log2 D)`` bits of the count of ones."""
    m = mask.reshape(-1).to(torch.long).cpu().numpy()
    payload = entropy_bits(m) + 2 if coder == "ideal" else arithmetic_encode(m, 2).bits
    return float(payload + math.ceil(math.log2(m.size + 1)))


class _Masked(nn.Module):
    """``model`` with each trained parameter replaced by ``f(values)`` scattered into its kept positions (zero
    elsewhere): the pruned model during retraining (``f`` the identity) and quantisation-aware training (``f`` the
    quantiser)."""

    def __init__(self, model: nn.Module, names: list[str], masks: list[Tensor], values: Tensor,
                 transform: nn.Module | None = None) -> None:
        super().__init__()
        self.model, self.names, self.masks, self.transform = model, names, masks, transform
        self.values = nn.Parameter(values)
        self.offsets = [0]
        for m in masks:
            self.offsets.append(self.offsets[-1] + int(m.sum()))

    def weights(self) -> dict[str, Tensor]:
        v = self.values if self.transform is None else self.transform(self.values)
        return {name: torch.zeros(m.shape, device=v.device, dtype=v.dtype).masked_scatter(m, v[a:b])
                for name, m, a, b in zip(self.names, self.masks, self.offsets, self.offsets[1:])}

    def forward(self, x: Tensor) -> Tensor:
        return torch.func.functional_call(self.model, self.weights(), (x,))

    @torch.no_grad()
    def write_back(self) -> None:
        """Put the masked (and transformed) weights into ``model``'s own parameters."""
        params = dict(self.model.named_parameters())
        for name, w in self.weights().items():
            params[name].copy_(w)


def pruning_bound(model: nn.Module, train: Data, test: Data | None = None, *, keep: float = 0.05, rounds: int = 4,
                  epochs: int = 30, epochs_per_round: int = 10, lr: float = 1e-3, batch_size: int = 128,
                  levels: int = 7, quant_init: str = "uniform", quant_epochs: int = 30, quant_lr: float = 1e-3,
                  hyperparameter_bits: float = 0.0, delta: float = 0.05, seed: int = 137,
                  coder: str = "arithmetic", precision: str = "32", max_epochs: int | None = None,
                  max_batches: int | None = None) -> BoundReport:
    """The pruning baseline of Table A.18 (``precision`` / ``max_epochs`` / ``max_batches`` as in
    :func:`compute_bound`): train ``model`` fully, then over ``rounds`` rounds remove the smallest
    weights (global magnitude, Han et al. 2016) down to the fraction ``keep`` of all trained numbers, retraining
    ``epochs_per_round`` after each round; quantise the kept weights with a learned codebook (QAT) and code them,
    their positions (each tensor's 0/1 mask, arithmetic-coded) and the codebook. Biases and normalisation
    parameters count as weights. ``model`` ends holding the decoded weights."""
    t0 = time.perf_counter()
    limits = {"precision": precision, "max_epochs": max_epochs, "max_batches": max_batches}
    train = _check_data("train", train)
    test = None if test is None else _check_data("test", test)
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0.0 < keep <= 1.0:
        raise ValueError(f"pruning_bound: keep must be a fraction in (0, 1], got {keep!r}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("pruning_bound: the model has no trainable parameters")
    names = [n for n, _ in named]
    _trainer(model, [p for _, p in named], lr=lr, epochs=epochs, batch_size=batch_size, seed=seed,
             desc="full", limits=limits).fit(train)
    train_error = error_rate(model, train)
    test_error = None if test is None else error_rate(model, test)
    sizes = [p.numel() for _, p in named]
    total = sum(sizes)
    masks = [torch.ones_like(p, dtype=torch.bool) for _, p in named]
    for r in range(1, rounds + 1):
        with torch.no_grad():
            flat = torch.cat([(p.detach() * m).abs().reshape(-1) for (_, p), m in zip(named, masks)])
            k = max(1, int(round(keep ** (r / rounds) * total)))  # a geometric schedule to the target
            keep_flat = torch.zeros(total, dtype=torch.bool, device=flat.device)
            keep_flat[flat.argsort(descending=True)[:k]] = True
            masks = [m.reshape(p.shape) for m, (_, p) in zip(keep_flat.split(sizes), named)]
        pruned = _Masked(model, names, masks, torch.cat([p.detach()[m] for (_, p), m in zip(named, masks)]))
        if epochs_per_round:
            _trainer(pruned, [pruned.values], lr=lr, epochs=epochs_per_round, batch_size=batch_size, seed=seed + r,
                     desc=f"prune {r}/{rounds}", limits=limits).fit(train)
        pruned.write_back()
    kept = torch.cat([p.detach()[m] for (_, p), m in zip(named, masks)])
    quantizer = Quantizer(levels).to(device=kept.device, dtype=kept.dtype)
    quantizer.initialize(kept, init=quant_init)
    qat = _Masked(model, names, masks, kept.clone(), transform=quantizer)
    if quant_epochs > 0:
        _trainer(qat, [qat.values, *quantizer.parameters()], lr=quant_lr, epochs=quant_epochs,
                 batch_size=batch_size, seed=seed + rounds + 1, desc="quantise", limits=limits).fit(train)
    codes = quantizer.codes(qat.values.detach())
    _Masked(model, names, masks, quantizer.codebook_fp16().to(kept.dtype)[codes]).write_back()
    buffers = _buffers_fp16_(model)
    positions = sum(_mask_bits(m, coder) for m in masks)
    return _finish("pruning", model, train=train, test=test, train_error=train_error, test_error=test_error,
                   codes=codes, levels=levels, num_params=total, intrinsic_dim=int(codes.numel()),
                   buffer_numbers=buffers, position_bits=positions, hyperparameter_bits=hyperparameter_bits,
                   delta=delta, coder=coder, t0=t0)


def holdout_bound(model: nn.Module, heldout: Data, delta: float = 0.05) -> float:
    """§5.5.2's data-dependent prior with the posterior at the prior: ``model`` trained on the other part of the
    data, its error on the ``m`` held-out points, bounded by :func:`~symkit.pacbayes.bounds.hoeffding_holdout_bound`
    with ``D`` the number of parameters."""
    heldout = _check_data("heldout", heldout)
    num_params = sum(p.numel() for p in model.parameters())
    return hoeffding_holdout_bound(error_rate(model, heldout), len(heldout[0]), num_params, delta)
