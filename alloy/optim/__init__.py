"""alloy.optim: SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, RAdam and NAdam with torch.optim's updates, each step a few
fused kernels; lr_scheduler."""
from alloy.optim.optimizer import Optimizer
from alloy.optim.sgd import SGD
from alloy.optim.adam import Adam, AdamW
from alloy.optim.rmsprop import RMSprop
from alloy.optim.adagrad import Adagrad
from alloy.optim.adamax import Adamax
from alloy.optim.radam import RAdam
from alloy.optim.nadam import NAdam
from alloy.optim import lr_scheduler
