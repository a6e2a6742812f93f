"""The offline data of the dynamics experiments: SBM graph connectivity and rasterised shapes."""

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import connected_components

from symkit.datasets.graphs import sbm_adjacency, sbm_connectivity
from symkit.datasets.shapes import polygon_coverage, regular_polygon, shapes_segmentation


def test_sbm_adjacency_structure_and_edge_rates():
    adj, member = sbm_adjacency(400, 2, 5, 0.5, 0.05, seed=0)
    assert adj.shape == (400, 10, 10)
    assert np.array_equal(adj, adj.transpose(0, 2, 1)) and np.all(np.diagonal(adj, axis1=1, axis2=2) == 0)
    same = member[:, :, None] == member[:, None, :]
    off = ~np.eye(10, dtype=bool)[None]
    p_hat = adj[same & off].mean()
    q_hat = adj[~same].mean()
    # 400 graphs x 40 intra pairs (p) and 25 inter pairs (q): binomial sd 0.004 and 0.0022
    assert abs(p_hat - 0.5) < 0.02 and abs(q_hat - 0.05) < 0.012
    # nodes are relabelled: cluster membership is not the identity layout
    assert (member != np.repeat([0, 1], 5)).any()


def test_sbm_labels_are_connectivity():
    X, Y = sbm_connectivity(200, seed=1, dtype=torch.float64)
    assert X.shape == (200, 1, 10, 10) and Y.shape == (200, 1)
    adj = X[:, 0].numpy() + 0.5
    truth = np.array([connected_components(a, directed=False)[0] == 1 for a in adj])
    assert np.array_equal(Y[:, 0].numpy() == 1, truth)
    assert 0.1 < Y.mean() < 0.9  # both classes present (P(connected) is about 0.4 here)


def test_polygon_coverage_area_and_orientation():
    tri = regular_polygon(3, 0.8)
    cover = polygon_coverage(tri, size=64, supersample=4)
    area = cover.sum() * (2 / 64) ** 2
    exact = 3 * np.sqrt(3) / 4 * 0.8**2
    assert area == pytest.approx(exact, rel=0.01)
    # one vertex up: the top half holds less of the triangle than the bottom half
    assert cover[:32].sum() < cover[32:].sum()
    with pytest.raises(ValueError, match="vertices"):
        polygon_coverage(np.zeros((2, 2)))


def test_shapes_segmentation_masks():
    X, M = shapes_segmentation(60, 14, seed=0, dtype=torch.float64)
    assert X.shape == (60, 1, 14, 14) and M.shape == (60, 2, 14, 14)
    kind = M.sum(dim=(2, 3)) > 0
    assert torch.all(kind.sum(dim=1) == 1)  # exactly one of pentagon / triangle per image
    assert 10 < int(kind[:, 0].sum()) < 50  # both shapes occur (p = 1/2)
    assert torch.all((M.sum(1) > 0) == (X[:, 0] + 0.5 >= 0.5))  # the mask is the thresholded coverage
    # fixed orientation: the data are not C4-invariant on average
    mean = (X[:, 0] + 0.5).mean(0)
    assert (mean - torch.rot90(mean, 2)).abs().max() > 0.01
    with pytest.raises(ValueError, match="scale"):
        shapes_segmentation(3, scale=(0.8, 0.7))
