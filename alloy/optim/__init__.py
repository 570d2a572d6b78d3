"""alloy.optim: SGD, Adam and AdamW with torch.optim's updates, each step a few fused kernels; lr_scheduler."""
from alloy.optim.optimizer import Optimizer
from alloy.optim.sgd import SGD
from alloy.optim.adam import Adam, AdamW
from alloy.optim import lr_scheduler
