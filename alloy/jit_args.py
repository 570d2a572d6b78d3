"""The arguments and results of a jitted function (alloy/jit.py): nested lists, tuples and dicts flattened into their
Tensors and everything else, checked against the capture's, and the returned structure rebuilt around new Tensors;
Python numbers traced as Scalars. Also how a captured launch picks its buffers."""
from __future__ import annotations
import operator
from alloy.ir.node import Node, views_a_buffer
from alloy.ir.ops import Op
from alloy.engine import realize as engine
from alloy import realize_tensors
from alloy.scalar import Scalar
from alloy.tensor import Tensor

TENSOR = object()   # marks a Tensor's place among the other arguments

def walk(obj, label: str, tensors: list, others: list, labels: list | None) -> None:
  """Collect the Tensors of nested lists/tuples/dicts; others gets one entry per item (a mark for a Tensor),
  labels (when given) the item's name beside each entry of others."""
  if labels is not None: labels.append(label)
  if type(obj) is Tensor:
    tensors.append(obj)
    others.append(TENSOR)
  elif type(obj) in (list, tuple):
    others.append((type(obj), len(obj)))
    for i, o in enumerate(obj): walk(o, f"{label}[{i}]", tensors, others, labels)
  elif type(obj) is dict:
    others.append((dict, tuple(obj)))
    for k, o in obj.items(): walk(o, f"{label}[{k!r}]", tensors, others, labels)
  else: others.append(obj)

def flatten_args(names: list[str], args: tuple, kwargs: dict, labels: list | None = None):
  tensors, others = [], []
  for i, a in enumerate(args): walk(a, names[i] if i < len(names) else f"args[{i}]", tensors, others, labels)
  for k, a in kwargs.items():
    if labels is not None: labels.append(f"keyword {k}")
    others.append(k)
    walk(a, k, tensors, others, labels)
  return tensors, others

def tensor_labels(others: list, labels: list) -> list[str]:
  return [label for o, label in zip(others, labels) if o is TENSOR]

def same(a: list, b: list) -> bool:
  try: return a == b
  except Exception: return False   # values whose == is not a bool (arrays): compared one by one on error

def rebuild(template, values, numbers: list | None = None):
  """The returned structure with its Tensors replaced, in order, by values (an iterator), and its traced numbers by
  their values for the call's number arguments (at capture, numbers=None: their values there)."""
  if template is TENSOR: return next(values)
  if isinstance(template, Seq): return template.kind(rebuild(t, values, numbers) for t in template.items)
  if isinstance(template, Map): return {k: rebuild(t, values, numbers) for k, t in template.items.items()}
  if type(template) is Scalar: return template.value if numbers is None else template.evaluate(numbers, {})
  return template

NUMBERS = (int, float, bool)   # the argument types a capture traces

def trace_numbers(obj, baked: dict, count: list):
  """obj with its Python numbers replaced by Scalars numbered in walk's order (count: [the next number])."""
  if type(obj) in NUMBERS:
    count[0] += 1
    return Scalar.argument(obj, count[0] - 1, baked)
  if type(obj) in (list, tuple): return type(obj)(trace_numbers(o, baked, count) for o in obj)
  if type(obj) is dict: return {k: trace_numbers(o, baked, count) for k, o in obj.items()}
  return obj

class Seq:
  def __init__(self, kind, items): self.kind, self.items = kind, items
class Map:
  def __init__(self, items): self.items = items

def template(obj, tensors: list):
  """The shape of a returned value: Tensors become TENSOR (collected in order), containers are kept."""
  if type(obj) is Tensor:
    tensors.append(obj)
    return TENSOR
  if type(obj) in (list, tuple): return Seq(type(obj), [template(o, tensors) for o in obj])
  if type(obj) is dict: return Map({k: template(o, tensors) for k, o in obj.items()})
  return obj   # a traced number (Scalar) is computed again per call (rebuild)

def bound_buffer(t: Tensor) -> Node:
  """t's node as a view of a buffer (any layout), realizing t first when it is lazy."""
  n = t.node
  if views_a_buffer(n): return n
  realize_tensors.realize([t])
  n = t.node
  if n.op is Op.BUFFER: n = t.node = engine.buffer_view(n.arg, n.shape)
  return n

def spec(t: Tensor, n: Node) -> tuple:
  return (n.shape, n.dtype, t.device, n.arg, n.src[0].arg.size)

def describe_layout(st, size: int) -> str:
  views = "; ".join(f"strides {v.strides} offset {v.offset}" + (f" mask {v.mask}" if v.mask else "") for v in st.views)
  return f"{views} into a buffer of {size}"

def picker(idx: tuple):
  """h -> tuple of h[i] for i in idx, in C where possible."""
  if len(idx) == 1:
    i = idx[0]
    return lambda h: (h[i],)
  if not idx: return lambda h: ()
  return operator.itemgetter(*idx)
