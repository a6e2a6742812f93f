"""Relaxed layers: paths with their own priors whose sum interpolates between equivariant and free layers."""

from symkit.nn.relaxed.container import (
    LAYER_TYPES,
    RelaxedCNN,
    RelaxedLayer,
    count_parameters,
    paper_parameter_count,
    paper_spec,
)
from symkit.nn.relaxed.layers import (
    AnchorBasis,
    EquivConv2d,
    FactoredFC2d,
    P4PointwiseConv2d,
    SparseConv2d,
    SparseFC2d,
    SpatialFC2d,
    aps_subsample,
    group_max_pool,
    lift_p4,
    n_anchors,
)
from symkit.nn.relaxed.record import KLinear, Site, SiteRecorder, record_site, recording

__all__ = [
    "LAYER_TYPES", "AnchorBasis", "EquivConv2d", "FactoredFC2d", "KLinear", "P4PointwiseConv2d", "RelaxedCNN",
    "RelaxedLayer", "Site", "SiteRecorder", "SparseConv2d", "SparseFC2d", "SpatialFC2d", "aps_subsample",
    "count_parameters", "group_max_pool", "lift_p4", "n_anchors", "paper_parameter_count", "paper_spec",
    "record_site", "recording",
]
