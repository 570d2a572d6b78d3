"""The linear program's instruction kinds: typed, each with its fields documented."""
import copy, pickle, pytest
from alloy import dtype as dt
from alloy.codegen.program import Instr, Kind, KINDS, KernelMeta, LinearProgram

def test_a_string_op_is_refused():
  with pytest.raises(TypeError, match="Kind"): Instr("load", dt.float32)
  with pytest.raises(TypeError, match="Kind"): Instr(None, None)
  assert Instr(Kind.CONST, dt.float32, (), 1.0).op is Kind.CONST

def test_every_kind_documents_its_fields():
  assert len(KINDS) == len({k.name for k in KINDS}) >= 26
  for k in KINDS:
    assert getattr(Kind, k.name) is k and repr(k) == f"Kind.{k.name}"
    for field in ("dtype", "src", "arg"): assert isinstance(getattr(k, field), str) and getattr(k, field), (k, field)

def test_kinds_stay_singletons():
  for k in KINDS: assert copy.deepcopy(k) is k and pickle.loads(pickle.dumps(k)) is k

def test_describe_prints_kind_names():
  one = Instr(Kind.CONST, dt.float32, (), 2.0)
  prog = LinearProgram([Instr(Kind.PARAM, dt.float32, (), 0), one, Instr(Kind.SHUFFLE, dt.float32, (one,), 16)], KernelMeta("k"))
  lines = prog.describe().split("\n")
  assert lines[0].split()[:2] == ["%0", "param"] and lines[1].split()[:3] == ["%1", "const", "float32"]
  assert lines[2].split()[:4] == ["%2", "shuffle", "float32", "[%1]"]
