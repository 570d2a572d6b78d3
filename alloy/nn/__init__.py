"""alloy.nn: Module, Parameter, the containers and the layers, with PyTorch's names, shapes and initializations;
`alloy.nn.functional` holds the functional ops."""
from alloy.nn import functional as functional
from alloy.nn.parameter import Parameter
from alloy.nn.module import Module
from alloy.nn.containers import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from alloy.nn.linear import Linear, Identity, Bilinear
from alloy.nn.flatten import Flatten, Unflatten
from alloy.nn.activation import (ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, LeakyReLU, ELU, SELU, CELU, Softplus, Hardtanh, ReLU6,
                                 Threshold, Mish, Hardswish, Hardsigmoid, PReLU, Softmin, Softsign, Tanhshrink, GLU, LogSigmoid,
                                 Softshrink, Hardshrink, Softmax2d, RReLU)
from alloy.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from alloy.nn.norm import (BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm, RMSNorm, InstanceNorm1d, InstanceNorm2d,
                           InstanceNorm3d, LocalResponseNorm)
from alloy.nn.sparse import Embedding, EmbeddingBag
from alloy.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from alloy.nn.pooling import (MaxPool1d, MaxPool2d, MaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                              AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, LPPool1d, LPPool2d, LPPool3d,
                              MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from alloy.nn.padding import (ConstantPad1d, ConstantPad2d, ConstantPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d, ReflectionPad1d,
                              ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, CircularPad1d,
                              CircularPad2d, CircularPad3d)
from alloy.nn.resample import (Upsample, PixelShuffle, PixelUnshuffle, CosineSimilarity, PairwiseDistance, Fold, Unfold, UpsamplingNearest2d,
                               UpsamplingBilinear2d, ChannelShuffle)
from alloy.nn.attention import MultiheadAttention
from alloy.nn.lazy import (LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
                           LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)
from alloy.nn.rnn import RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell
from alloy.nn.transformer import (TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder, TransformerDecoder,
                                  Transformer)
from alloy.nn.loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss, BCEWithLogitsLoss,
                           KLDivLoss, PoissonNLLLoss, GaussianNLLLoss, MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss,
                           MultiLabelSoftMarginLoss, CosineEmbeddingLoss, TripletMarginLoss, MultiMarginLoss, MultiLabelMarginLoss,
                           CTCLoss, TripletMarginWithDistanceLoss)
from alloy.nn import init, utils
