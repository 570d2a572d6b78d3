"""PyTorch's torch.nn.functional namespace: the functional ops, implemented in alloy/functional/."""
from alloy.functional.activation import (relu, relu6, leaky_relu, elu, selu, celu, gelu, silu, mish, sigmoid, tanh, hardtanh,
                                         hardsigmoid, hardswish, softplus, logsigmoid, softsign, tanhshrink, threshold,
                                         softmax, log_softmax, softmin, glu, normalize, relu_, leaky_relu_, elu_, selu_, celu_,
                                         hardtanh_, threshold_, prelu, rrelu, gumbel_softmax)
from alloy.functional.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from alloy.functional.pool import (max_pool1d, max_pool2d, max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d,
                                   adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, unfold, fold,
                                   adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d, lp_pool1d, lp_pool2d, lp_pool3d,
                                   max_unpool1d, max_unpool2d, max_unpool3d)
from alloy.functional.resample import interpolate, upsample, upsample_nearest, upsample_bilinear
from alloy.functional.loss import (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy,
                                   binary_cross_entropy_with_logits, kl_div)
from alloy.functional.norm import layer_norm, rms_norm, group_norm, batch_norm, instance_norm, local_response_norm
from alloy.functional.dropout import dropout, dropout1d, dropout2d, dropout3d, alpha_dropout, feature_alpha_dropout
from alloy.functional.attention import scaled_dot_product_attention
from alloy.functional.linear import linear, pad, pixel_shuffle, pixel_unshuffle, cosine_similarity, pairwise_distance, channel_shuffle
from alloy.gathering import one_hot, embedding
from alloy.functional.embedding_bag import embedding_bag
from alloy.functional.grid_sample import affine_grid, grid_sample
from alloy.functional.ctc_loss import ctc_loss
from alloy.mathfuncs import hardshrink, softshrink
from alloy.functional.more_losses import (poisson_nll_loss, gaussian_nll_loss, margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
                                          multilabel_soft_margin_loss, cosine_embedding_loss, triplet_margin_loss, multi_margin_loss,
                                          multilabel_margin_loss, triplet_margin_with_distance_loss)

__all__ = ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid", "tanh", "hardtanh",
           "hardsigmoid", "hardswish", "softplus", "logsigmoid", "softsign", "tanhshrink", "threshold", "softmax",
           "log_softmax", "softmin", "glu", "normalize", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
           "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "interpolate", "upsample",
           "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "layer_norm", "rms_norm", "group_norm", "batch_norm",
           "instance_norm", "dropout", "scaled_dot_product_attention", "linear", "pad", "pixel_shuffle", "pixel_unshuffle",
           "cosine_similarity", "pairwise_distance", "unfold", "fold", "relu_", "leaky_relu_", "elu_", "selu_", "celu_",
           "hardtanh_", "threshold_", "one_hot", "embedding", "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss",
           "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "multi_margin_loss", "hardshrink", "softshrink", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "prelu", "rrelu", "gumbel_softmax", "upsample_nearest", "upsample_bilinear", "lp_pool1d", "lp_pool2d",
           "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "local_response_norm", "channel_shuffle", "multilabel_margin_loss",
           "embedding_bag", "affine_grid", "grid_sample", "ctc_loss", "triplet_margin_with_distance_loss"]
