"""The house style that ruff cannot check (docs/style.md): every block is indented two spaces deeper than its parent,
with spaces only. Ruff's own indentation rule counts in fours whatever its indent-width says."""
import io, pathlib, tokenize
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = sorted(p for folder in ("alloy", "test", "bench") for p in (ROOT / folder).rglob("*.py")) + [ROOT / "example.py"]

def bad_indents(text: str) -> list[str]:
  """Lines whose block indent is not its parent's plus two spaces, or that indent with tabs."""
  bad, stack = [], [0]
  for tok in tokenize.generate_tokens(io.StringIO(text).readline):
    if tok.type == tokenize.INDENT:
      if "\t" in tok.string: bad.append(f"line {tok.start[0]}: a tab in the indentation")
      elif len(tok.string) != stack[-1] + 2: bad.append(f"line {tok.start[0]}: indented {len(tok.string) - stack[-1]} spaces past its block")
      stack.append(len(tok.string))
    elif tok.type == tokenize.DEDENT: stack.pop()
  return bad

@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_two_space_blocks(path):
  bad = bad_indents(path.read_text())
  assert not bad, f"{path.relative_to(ROOT)}:\n" + "\n".join(bad[:10])

def test_the_check_catches_four_spaces():
  assert bad_indents("if x:\n    y = 1\n") and not bad_indents("if x:\n  y = 1\n  if y:\n    z = 2\n")

SOURCES = sorted(p for p in (ROOT / "alloy").rglob("*") if p.suffix in (".py", ".c", ".h", ".cpp") or p.parent.name == "shim")
LIMIT = 420   # "about 400 lines"

@pytest.mark.parametrize("path", [p for p in SOURCES if p.is_file()], ids=lambda p: str(p.relative_to(ROOT)))
def test_long_files_say_why_at_their_top(path):
  lines = path.read_text().splitlines()
  if len(lines) <= LIMIT: return
  assert "400 lines" in "\n".join(lines[:12]), f"{path.relative_to(ROOT)} has {len(lines)} lines: split it, or say why at its top"
