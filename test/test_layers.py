"""The map's import rules (docs/architecture.md, "Layers"), read from the code: every import inside alloy/ points down
the layer table, and no module imports another module's underscore names or reaches into them through an import."""
import ast, pathlib, sys
import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "alloy"

# layer -> the layers its modules may import (its own included); the same table as docs/architecture.md
ALLOWED = {
  "base":     {"base"},
  "ir":       {"base", "ir"},
  "schedule": {"base", "ir", "schedule"},
  "codegen":  {"base", "ir", "codegen"},
  "renderer": {"base", "ir", "codegen", "renderer"},
  "runtime":  {"base", "renderer", "runtime"},
  "engine":   {"base", "ir", "schedule", "codegen", "renderer", "runtime", "engine"},
  "front":    {"base", "ir", "schedule", "codegen", "renderer", "runtime", "engine", "front"},
}
FOLDERS = {"ir", "schedule", "codegen", "renderer", "runtime", "engine"}
FRONT = {"tensor", "autograd", "indexing", "assign", "inplace", "scatter", "jit", "jit_args", "jit_state", "trace", "dlpack", "scalar",
         "__init__", "functional", "nn", "optim", "state", "data", "gathering", "bounds", "rearrange", "sampling", "matrices", "mathfuncs",
         "trig", "special", "torch_functions", "scatter_sum", "linalg", "grad_transforms", "stats", "structured", "windows",
         "ordering", "scans", "contraction", "triangular", "logexp", "vector_norm", "multi", "collectives", "data_parallel",
         "realize_tensors"}
BASE = {"helpers", "dtype", "caps"}

def layer_of(module: str) -> str:
  """The layer of a dotted module name inside alloy ("alloy.runtime.cpu.queue" -> "runtime")."""
  parts = module.split(".")[1:] or ["__init__"]
  if parts[0] in FOLDERS: return parts[0]
  if parts[0] in FRONT: return "front"
  if parts[0] in BASE: return "base"
  raise AssertionError(f"{module} is in no layer of the map: add it to docs/architecture.md and to this test's table")

def module_name(path: pathlib.Path) -> str:
  rel = path.relative_to(PACKAGE.parent).with_suffix("")
  parts = list(rel.parts)
  if parts[-1] == "__init__" and len(parts) > 1: parts.pop()
  return ".".join(parts)

def resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
  if not node.level: return node.module or ""
  base = module.split(".") if is_package else module.split(".")[:-1]
  base = base[:len(base) - (node.level - 1)]
  return ".".join(base + ([node.module] if node.module else []))

def imports(path: pathlib.Path):
  """(line, imported module, names taken from it) for each alloy import of the file; names are () for `import x`."""
  module, tree = module_name(path), ast.parse(path.read_text(), str(path))
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith("alloy"): yield node.lineno, alias.name, (), alias.asname
    elif isinstance(node, ast.ImportFrom):
      target = resolve(module, node, path.name == "__init__.py")
      if target.startswith("alloy"): yield node.lineno, target, tuple(a.name for a in node.names), None

def is_module(dotted: str) -> bool:
  path = PACKAGE.parent.joinpath(*dotted.split("."))
  return path.with_suffix(".py").exists() or (path / "__init__.py").exists()

def source_files(): return sorted(p for p in PACKAGE.rglob("*.py"))

def layer_violations(files) -> list[str]:
  bad = []
  for path in files:
    here = module_name(path)
    for line, target, names, _ in imports(path):
      # `from alloy.runtime import cuda` imports the module alloy.runtime.cuda
      targets = [f"{target}.{n}" if is_module(f"{target}.{n}") else target for n in names] or [target]
      for t in targets:
        if layer_of(t) not in ALLOWED[layer_of(here)]:
          bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {layer_of(here)} module {here} imports {t} ({layer_of(t)})")
  return bad

def private_reaches(files) -> list[str]:
  bad = []
  for path in files:
    here, tree = module_name(path), ast.parse(path.read_text())
    modules = {}   # local name -> alloy module it names
    for line, target, names, asname in imports(path):
      if not names: modules[asname or target.split(".")[0]] = target
      for n in names:
        if is_module(f"{target}.{n}"): modules[n] = f"{target}.{n}"
        elif n.startswith("_") and not n.startswith("__") and target != here:
          bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports the private name {n} of {target}")
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
          and node.attr.startswith("_") and not node.attr.startswith("__")):
        bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: reaches into {modules[node.value.id]}.{node.attr}")
  return bad

def test_every_module_has_a_layer():
  for path in source_files(): layer_of(module_name(path))

def test_imports_point_down_the_layer_table():
  bad = layer_violations(source_files())
  assert not bad, "imports that the layer table forbids:\n" + "\n".join(bad)

def test_no_module_reaches_into_anothers_private_names():
  bad = private_reaches(source_files())
  assert not bad, "underscore names used across modules:\n" + "\n".join(bad)

@pytest.mark.parametrize("source, layer", [("from alloy.codegen.opts import choose_opts", "runtime"),
                                           ("import alloy.tensor", "engine"),
                                           ("from alloy.runtime.device import Device", "codegen"),
                                           ("from alloy.engine import realize", "schedule")])
def test_a_forbidden_import_is_caught(tmp_path, monkeypatch, source, layer):
  """The checker itself: an upward import written into a module of `layer` is reported."""
  folder = tmp_path / "alloy" / layer
  folder.mkdir(parents=True)
  (folder / "probe.py").write_text(source + "\n")
  monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "alloy")
  assert layer_violations([folder / "probe.py"]), f"{source!r} in {layer}/ should be refused"

def test_a_private_import_is_caught(tmp_path, monkeypatch):
  folder = tmp_path / "alloy" / "engine"
  folder.mkdir(parents=True)
  (folder / "probe.py").write_text("from alloy.schedule.fusion import _structure\nfrom alloy.ir import view\nview._helper()\n")
  monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "alloy")
  (tmp_path / "alloy" / "ir").mkdir()
  (tmp_path / "alloy" / "ir" / "view.py").write_text("")
  assert len(private_reaches([folder / "probe.py"])) == 2
