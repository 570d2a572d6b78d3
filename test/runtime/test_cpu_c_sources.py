"""The CPU device's C files (runtime/cpu/queue.c, team.c, queue.h) compile without a warning, built exactly as the
device builds them (CFLAGS, -Wall -Wextra, the -D defines) plus -Werror; and the queue
library's cache key follows every C file."""
import shutil
import pytest
from alloy.runtime.cpu import queue
from alloy.runtime.cpu.compiler import CPUCompiler
from alloy.runtime.device import CompileError

@pytest.fixture(scope="module")
def compiler(): return CPUCompiler()

def test_queue_and_team_compile_without_warnings(compiler):
  try: binary = queue.compile_queue(compiler, extra=("-Werror",))
  except CompileError as e: pytest.fail(f"queue.c / team.c warn under -Wall -Wextra -Werror:\n{e.message}")
  assert binary

def test_c_files_need_the_defines(compiler):
  with pytest.raises(CompileError, match="-D defines"): compiler.shared_library(["-fsyntax-only", *map(str, queue.SOURCES)])

@pytest.mark.parametrize("name", ["queue.c", "team.c", "queue.h"])
def test_cache_key_follows_each_c_file(compiler, tmp_path, monkeypatch, name):
  for f in (*queue.SOURCES, *queue.HEADERS): shutil.copy(f, tmp_path / f.name)
  monkeypatch.setattr(queue, "SOURCES", tuple(tmp_path / f.name for f in queue.SOURCES))
  monkeypatch.setattr(queue, "HEADERS", tuple(tmp_path / f.name for f in queue.HEADERS))
  before = queue.queue_key(compiler)
  with open(tmp_path / name, "a") as f: f.write("/* changed */\n")
  assert queue.queue_key(compiler) != before
