"""torch.nn.utils: gradient clipping and parameter vectors (clip_grad.py), weight_norm and spectral_norm
(weight_norm.py), and `rnn` (pad_sequence, unpad_sequence)."""
from alloy.nn.utils.clip_grad import (get_total_norm, clip_grads_with_norm_, clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                                      vector_to_parameters)
from alloy.nn.utils.weight_norm import weight_norm, remove_weight_norm, spectral_norm, remove_spectral_norm
from alloy.nn.utils import rnn

__all__ = ["get_total_norm", "clip_grads_with_norm_", "clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "rnn"]
