"""alloy.nn: Module, Parameter, the containers and the layers, with PyTorch's names, shapes and initializations."""
from alloy.nn.parameter import Parameter
from alloy.nn.module import Module
from alloy.nn.containers import Sequential, ModuleList, ModuleDict
from alloy.nn.linear import Linear, Identity
from alloy.nn.flatten import Flatten, Unflatten
from alloy.nn.activation import ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax
from alloy.nn import init
