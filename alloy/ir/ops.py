"""The op vocabulary of the lazy graph and of kernels."""
from enum import Enum, auto

class Op(Enum):
  # sources
  BUFFER = auto()      # a realized device buffer; arg = Buffer
  CONST = auto()       # arg = Python scalar; any shape (every element is the scalar)
  INPUT = auto()       # inside a kernel AST: the kernel's buffer number arg; shape (size,)
  ARANGE = auto()      # int32 element index 0..n-1; shape (n,)
  # movement: arg = ShapeTracker
  VIEW = auto()
  # unary
  NEG = auto(); NOT = auto(); ABS = auto(); RECIP = auto(); SQRT = auto(); RSQRT = auto()
  EXP = auto(); EXP2 = auto(); LOG = auto(); LOG2 = auto(); SIN = auto(); COS = auto(); TAN = auto()
  TANH = auto(); ERF = auto(); FLOOR = auto(); CEIL = auto(); ROUND = auto(); TRUNC = auto()
  # binary
  ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); IDIV = auto(); MOD = auto(); POW = auto()
  MAX = auto(); MIN = auto(); AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()
  CMPLT = auto(); CMPLE = auto(); CMPEQ = auto(); CMPNE = auto()
  # ternary
  WHERE = auto()
  # type
  CAST = auto(); BITCAST = auto()
  # reduction: arg = (Op.ADD | Op.MAX | Op.MIN | Op.MUL, axes); keeps reduced axes as size 1
  REDUCE = auto()
  # gather: src = (x, idx_0, ..., idx_m) with equal index shapes B; arg = the m+1 gathered axes of x;
  # shape = B + x.shape without the gathered axes
  GATHER = auto()
  # force a materialized, contiguous copy
  CONTIGUOUS = auto()
  __hash__ = object.__hash__   # members are singletons; Enum's own hash is a slow Python call

UNARY = {Op.NEG, Op.NOT, Op.ABS, Op.RECIP, Op.SQRT, Op.RSQRT, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS,
         Op.TAN, Op.TANH, Op.ERF, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC}
BINARY = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.IDIV, Op.MOD, Op.POW, Op.MAX, Op.MIN, Op.AND, Op.OR, Op.XOR,
          Op.SHL, Op.SHR, Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE}
COMPARE = {Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE}
ELEMENTWISE = UNARY | BINARY | {Op.WHERE, Op.CAST, Op.BITCAST}
# rough cost in FLOPs of one application, for kernel metadata
FLOP_COST = {op: 1 for op in ELEMENTWISE} | {Op.EXP: 4, Op.LOG: 4, Op.SIN: 8, Op.COS: 8, Op.TAN: 10, Op.TANH: 8,
                                               Op.ERF: 10, Op.POW: 8, Op.CAST: 0, Op.BITCAST: 0}
