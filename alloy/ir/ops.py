"""The op vocabulary of the lazy graph and of kernels."""

class Op:
  """One op: a named singleton, compared and hashed by identity. A plain class rather than an Enum: in
  Python 3.11 every `Op.X` lookup on an Enum passes through EnumType.__getattr__ (~10x slower), and graph
  building and lowering look ops up constantly."""
  __slots__ = ("name",)
  def __init__(self, name: str): self.name = name
  def __repr__(self): return f"Op.{self.name}"
  def __reduce__(self): return (getattr, (Op, self.name))   # copies and pickles resolve to the one instance
  # sources
  BUFFER: "Op"      # a realized device buffer; arg = Buffer
  CONST: "Op"       # arg = Python scalar; any shape (every element is the scalar)
  INPUT: "Op"       # inside a kernel AST: the kernel's buffer number arg; shape (size,)
  ARANGE: "Op"      # element index 0..n-1 (int32, or int64 past 2^31 - 1); shape (n,)
  VAR: "Op"         # inside a kernel AST: the kernel's scalar argument number arg (a lifted CONST); any shape
  # movement: arg = ShapeTracker
  VIEW: "Op"
  # unary
  NEG: "Op"; NOT: "Op"; ABS: "Op"; RECIP: "Op"; SQRT: "Op"; RSQRT: "Op"; EXP: "Op"; EXP2: "Op"; LOG: "Op"
  LOG2: "Op"; SIN: "Op"; COS: "Op"; TAN: "Op"; TANH: "Op"; ERF: "Op"; FLOOR: "Op"; CEIL: "Op"; ROUND: "Op"
  TRUNC: "Op"
  # binary
  ADD: "Op"; SUB: "Op"; MUL: "Op"; DIV: "Op"; IDIV: "Op"; MOD: "Op"; POW: "Op"; MAX: "Op"; MIN: "Op"
  AND: "Op"; OR: "Op"; XOR: "Op"; SHL: "Op"; SHR: "Op"; CMPLT: "Op"; CMPLE: "Op"; CMPEQ: "Op"; CMPNE: "Op"
  # ternary
  WHERE: "Op"
  # type
  CAST: "Op"; BITCAST: "Op"
  # reduction: arg = (Op.ADD | Op.MAX | Op.MIN | Op.MUL, axes); keeps reduced axes as size 1
  REDUCE: "Op"
  # gather: src = (x, idx_0, ..., idx_m) with equal index shapes B; arg = the m+1 gathered axes of x;
  # shape = B + x.shape without the gathered axes
  GATHER: "Op"
  # force a materialized, contiguous copy
  CONTIGUOUS: "Op"
  # softmax(q k^T * scale) v as one kernel: src = (q, k, v), arg = (scale, causal); made only for a device with a
  # fused kernel for it (ir/attention.py holds its contract)
  ATTENTION: "Op"

for _name in Op.__annotations__: setattr(Op, _name, Op(_name))

UNARY = {Op.NEG, Op.NOT, Op.ABS, Op.RECIP, Op.SQRT, Op.RSQRT, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS,
         Op.TAN, Op.TANH, Op.ERF, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC}
BINARY = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.IDIV, Op.MOD, Op.POW, Op.MAX, Op.MIN, Op.AND, Op.OR, Op.XOR,
          Op.SHL, Op.SHR, Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE}
COMPARE = {Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE}
# ops whose result is one of their operands or its sign flipped: a float held wider needs no rounding after them
SELECTS = {Op.WHERE, Op.MAX, Op.MIN, Op.NEG, Op.ABS}
ELEMENTWISE = UNARY | BINARY | {Op.WHERE, Op.CAST, Op.BITCAST}
# rough cost in FLOPs of one application, for kernel metadata
FLOP_COST = {op: 1 for op in ELEMENTWISE} | {Op.EXP: 4, Op.LOG: 4, Op.SIN: 8, Op.COS: 8, Op.TAN: 10, Op.TANH: 8,
                                               Op.ERF: 10, Op.POW: 8, Op.CAST: 0, Op.BITCAST: 0}
