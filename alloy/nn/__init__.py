"""alloy.nn: Module, Parameter, the containers and the layers, with PyTorch's names, shapes and initializations;
`alloy.nn.functional` holds the functional ops."""
from alloy.nn import functional as functional
from alloy.nn.parameter import Parameter
from alloy.nn.module import Module
from alloy.nn.containers import Sequential, ModuleList, ModuleDict
from alloy.nn.linear import Linear, Identity
from alloy.nn.flatten import Flatten, Unflatten
from alloy.nn.activation import (ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU, SELU, CELU, Softplus, Hardtanh, ReLU6,
                                 Threshold, Mish, Hardswish, Hardsigmoid)
from alloy.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from alloy.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm, RMSNorm
from alloy.nn.sparse import Embedding
from alloy.nn.dropout import Dropout
from alloy.nn.pooling import MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d
from alloy.nn.attention import MultiheadAttention
from alloy.nn.loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss, BCEWithLogitsLoss,
                           KLDivLoss)
from alloy.nn import init, utils
