"""python -m alloy.trace out.json: the kernels of a trace as a table (count, total time, share, GB/s, GFLOP/s).

Only the command-line entry point; the recorder (and `alloy.trace`, the context manager) is alloy/engine/trace.py.
"""
import sys
from alloy.engine.trace import kernel_table, format_table

def main(argv: list[str]) -> int:
  if len(argv) != 1:
    print("usage: python -m alloy.trace TRACE.json", file=sys.stderr)
    return 2
  print(format_table(kernel_table(argv[0])))
  return 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
