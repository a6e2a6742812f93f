"""What symkit has not reproduced, as data: the papers' results that no registered paper value covers, and what the
paper-scale runs of the registered experiments need that this project lacks.

``docs/reproductions.md`` (``symkit report --docs``, :mod:`symkit.lab.runner.reproductions`) writes a row for every
registered paper value group and every entry of :data:`UNREPRODUCED`; each entry quotes the paper's numbers with
where they are printed, says why symkit has no run of it, and names the command that runs it where one exists.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Document", "Unreproduced", "DOCUMENTS", "UNREPRODUCED", "PAPER_SCALE_NEEDS", "document_of"]


@dataclass(frozen=True)
class Document:
    """A paper symkit reproduces: ``key``, its citation, and ``marks``, the words by which an experiment's
    ``reproduces`` text names it."""

    key: str
    title: str
    marks: tuple[str, ...]


@dataclass(frozen=True)
class Unreproduced:
    """A paper result with no registered paper value: where it is (``document``, ``result``), the paper's numbers or
    claim as printed (``paper``), why symkit has no run of it (``reason``), what a run needs that this project lacks
    (``needs``: data or hardware; empty when nothing but the work is missing) and the command that runs it, where
    an experiment already can (``command``)."""

    document: str
    result: str
    paper: str
    reason: str
    needs: str = ""
    command: str = ""

    def __post_init__(self) -> None:
        if self.document not in {d.key for d in DOCUMENTS}:
            raise ValueError(f"unreproduced result {self.result!r}: document must be one of "
                             f"{', '.join(d.key for d in DOCUMENTS)}, got {self.document!r}")


DOCUMENTS = (
    Document("thesis", "Finzi 2023, *Understanding and Incorporating Mathematical Inductive Biases in Neural "
             "Networks* (NYU PhD thesis)", ("thesis",)),
    Document("layerwise", "van der Ouderaa, Immer & van der Wilk 2023, *Learning Layer-wise Equivariances "
             "Automatically using Gradients*", ("van der Ouderaa",)),
    Document("dynamics", "Nordenfors, Ohlsson & Flinth 2023, *Optimization Dynamics of Equivariant and Augmented "
             "Neural Networks*", ("Nordenfors",)),
    Document("powernet", "*PowerNet: Truncated Matrix Power Series as Quasi-Equivariant Layers* (ICLR 2025 "
             "submission)", ("PowerNet",)),
    Document("sharing", "Yeh, Hu, Hasegawa-Johnson & Schwing 2022, *Equivariance Discovery by Learned "
             "Parameter-Sharing*", ("Yeh",)),
)


def document_of(reproduces: str) -> str:
    """The key of the document an experiment's ``reproduces`` text names; ``ValueError`` when it names none."""
    for document in DOCUMENTS:
        if any(mark in reproduces for mark in document.marks):
            return document.key
    raise ValueError(f"{reproduces!r} names none of the documents symkit reproduces "
                     f"({', '.join(d.key for d in DOCUMENTS)}); add its marks to DOCUMENTS")


_THESIS_GPU = "the thesis's data sets (none bundled) and GPU time (ch. 5 took about 8000 GPU hours)"
_CIFAR = "CIFAR-10's files (not bundled) and a GPU"

#: the paper results that no registered paper value covers, in each document's order
UNREPRODUCED = (
    Unreproduced(
        "thesis", "Table 3.1, UCI columns (RPP-Conv)",
        "UCI test MSE, ± 1 std over 10 trials (Energy, Fertility, Pendulum, Wine): MLP 0.39, 0.049, 4.65, 0.66; "
        "RPP 0.73, 0.060, 4.25, 0.69; Conv 1.34, 0.076, 4.63, 0.79",
        "no experiment: `rpp-conv` runs the CIFAR-10 columns; the UCI rows reshape tabular inputs into small "
        "zero-padded images for a three-layer RPP-Conv",
        needs="the four UCI data sets (none bundled)"),
    Unreproduced(
        "thesis", "Figure A.2 (RPP in the policy only)",
        "SAC with an RPP policy and MLP critics, against the MLP, at 10^6 steps (curves only)",
        "rl-sac builds it (`model=rpp-policy`); no run at the thesis's budget",
        needs="10^6 steps a run: 16-18 CPU-hours per RPP run here (ten times docs/rl.md's 100,000-step runs)",
        command="symkit reproduce rl-sac --sweep model=relu-mlp,rpp-policy"),
    Unreproduced(
        "thesis", "Table 5.2 (bounds against the state of the art)",
        "data-independent error bounds (%, δ = .05): MNIST 11.6, FashionMNIST 32.8, CIFAR-10 58.2, CIFAR-100 94.6, "
        "ImageNet 93.5; data-dependent: MNIST 1.4, FashionMNIST 10.1, CIFAR-10 16.6, CIFAR-100 44.4, ImageNet 40.9",
        "pac-bayes-digits runs Algorithm 2 on digits (Fig. 5.1, App. A.4.6), not the table's architectures and data "
        "sets", needs=_THESIS_GPU),
    Unreproduced(
        "thesis", "Table A.18 (pruning baseline)",
        "error bound (%) with intrinsic dimension + quantisation + coding against pruning + quantisation + coding: "
        "MNIST 11.6 / 47.9, FashionMNIST 32.8 / 54.9, SVHN 36.1 / 74.4, CIFAR-10 58.2 / 100.0, CIFAR-100 "
        "94.6 / 99.9",
        "on the bundled digits `pac-bayes-digits` runs it (`method=pruning`, results/pac-bayes-digits.jsonl): every "
        "pruning bound vacuous, the subspace's not, as in the table (docs/pacbayes.md); on these data sets, "
        "`symkit reproduce pac-bayes-digits --scale paper --data-dir DATA` for MNIST",
        needs=_THESIS_GPU),
    Unreproduced(
        "thesis", "Table A.23 (full batch against SGD)",
        "error bound (%), SGD against full batch at four weight decays: MNIST LeNet-5 11.6 / 11.2-12.5, CIFAR-10 "
        "ResNet-18 74.7 / 75.3-77.8, CIFAR-10 ConvNet 58.2 / 61.4-65.8",
        "pac-bayes-structure runs the comparison (`optimizer=full-batch`) for a small CNN on the bundled digits, not "
        "on the table's architectures and data sets (docs/pacbayes.md)",
        needs=_THESIS_GPU + "; 3000 full-batch epochs a bound"),
    Unreproduced(
        "layerwise", "Table 3, CIFAR-10 rows",
        "CIFAR-10: MAP acc 68.33, Laplace acc 80.94, marginal likelihood 0.926, FC / CONV / GCONV 0 / 44 / 56 %; "
        "rotated CIFAR-10: MAP acc 48.30, Laplace acc 55.68, marginal likelihood 1.630, FC / CONV / GCONV "
        "4 / 14 / 82 %",
        "layerwise-rotated runs the MNIST rows only", needs=_CIFAR),
    Unreproduced(
        "layerwise", "Table 7 (roto-translation factorisations)",
        "rotated CIFAR-10 test accuracy (%), MAP: full filters 73.70 (channel matched) and 69.89 (parameter "
        "matched), separable 61.31 / 59.99, depthwise separable 51.63 / 49.77, pointwise 66.77, classical CNN 57.89",
        "no experiment", needs=_CIFAR),
    Unreproduced(
        "powernet", "§4.2, CIFAR-10 classification",
        "75% test accuracy (5 blocks of one 32-channel layer)",
        "powernet-classify runs it (`data=cifar10`, in its paper sweep); the 75% is not a registered paper value",
        needs="CIFAR-10's files (not bundled)",
        command="symkit reproduce powernet-classify --scale paper --data-dir DATA"),
)

#: what the paper-scale runs of a registered experiment need that this project lacks (data sets are never
#: downloaded; docs/scale.md), by experiment
PAPER_SCALE_NEEDS = {
    "dynamics-drift": "MNIST's files (not bundled) and a GPU: about 80 CPU-days a group of 30 runs (docs/scale.md)",
    "layerwise-cifar": "CIFAR-10's files (not bundled) and a GPU",
    "layerwise-quadrant": "MNIST's files (not bundled) and a GPU",
    "layerwise-rotated": "MNIST's files (not bundled) and a GPU",
    "lee-rotmnist": "MNIST's files (not bundled)",
    "lee-trends": "CIFAR-10's files (not bundled)",
    "lee-zoo": "an image folder or MNIST / CIFAR-10 files (not bundled)",
    "pac-bayes-digits": "MNIST's files (not bundled)",
    "pac-bayes-structure": "CIFAR-10's files (not bundled) and a GPU",
    "powernet-angle": "MNIST's files (not bundled); about 4 CPU-hours a run",
    "powernet-classify": "MNIST's and CIFAR-10's files (not bundled)",
    "rpp-conv": "CIFAR-10's files (not bundled) and a GPU: 200 epochs x 3 models x 10 trials",
    "rl-sac": ("10^6 steps a run, six environments, four seeds: 16-18 CPU-hours per RPP run here (ten times "
               "docs/rl.md's 100,000-step runs, which docs/rl.md compares)"),
}
