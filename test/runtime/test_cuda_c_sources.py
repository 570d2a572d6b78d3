"""The CUDA device's C sources (the launch list's native loop, launch_loop.c) compile without a warning under
-Wall -Wextra -Werror. Needs only a C compiler: no GPU, no CUDA toolkit, not even cuda-bindings."""
import os, shutil, subprocess
from pathlib import Path
import pytest
import alloy

SOURCES = sorted((Path(alloy.__file__).parent / "runtime" / "cuda").glob("*.c"))

def _c_compiler():
  return next((p for c in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"] if (p := shutil.which(c))), None)

def test_sources_found():
  assert "launch_loop.c" in [p.name for p in SOURCES]

@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_compiles_without_warnings(source, tmp_path):
  if (cc := _c_compiler()) is None: pytest.skip("no C compiler")
  # the CPU device's way (a shared library, -O2 for the warnings that need optimization), with every warning an error
  proc = subprocess.run([cc, "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-x", "c", str(source), "-o", str(tmp_path / "out.so")],
                        capture_output=True, text=True)
  assert proc.returncode == 0, f"{cc} -Wall -Wextra -Werror {source.name}:\n{proc.stderr}"
