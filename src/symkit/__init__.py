"""symkit: symmetry in neural networks.

Build exactly equivariant models for any matrix group, relax them into soft or quasi-equivariance, learn how much
symmetry each layer should have, discover symmetry from data, and measure the equivariance of any torch model.
"""

__version__ = "0.1.0"
