"""alloy.nn: PyTorch's neural-network namespace. `alloy.nn.functional` holds the functional ops."""
from alloy.nn import functional as functional
