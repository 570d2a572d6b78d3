"""The functional ops models need (convolution, pooling, losses, normalization, attention, activations), each
built from alloy's lazy primitives so that it fuses and differentiates like any other work. `alloy.nn.functional`
is PyTorch's name for the same functions."""
