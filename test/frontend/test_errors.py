"""Mistakes raise clear errors at the call that made them."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.runtime.device import CompileError
from alloy.runtime.cpu.compiler import CPUCompiler

def test_broadcast_error():
  with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4,\) cannot be broadcast"):
    Tensor(np.ones((2, 3), np.float32)) + Tensor(np.ones(4, np.float32))

def test_matmul_error():
  with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) are not aligned"):
    Tensor(np.ones((2, 3), np.float32)) @ Tensor(np.ones((4, 5), np.float32))
  with pytest.raises(ValueError, match="at least 1 dimension"):
    Tensor(2.0) @ Tensor(np.ones(3, np.float32))

def test_reshape_error():
  with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\) \(6 elements\) into shape \(4, 2\)"):
    Tensor(np.ones((2, 3), np.float32)).reshape(4, 2)
  with pytest.raises(ValueError, match="only one dimension can be -1"):
    Tensor(np.ones((2, 3), np.float32)).reshape(-1, -1)

def test_axis_errors():
  t = Tensor(np.ones((2, 3), np.float32))
  with pytest.raises(IndexError, match=r"dimension 2 is out of range for a tensor with 2 dimensions"): t.sum(2)
  with pytest.raises(IndexError, match="out of range"): t.permute(0, 5)
  with pytest.raises(ValueError, match="expand"): t.expand(4, 3)

def test_size_argument_errors():
  t = Tensor(np.ones((2, 3), np.float32))
  with pytest.raises(ValueError, match=r"flatten: start_dim \(1\) comes after end_dim \(0\)"): t.flatten(1, 0)
  with pytest.raises(ValueError, match="split: split_size must be positive"): t.split(0)
  assert [p.shape for p in Tensor.zeros(0, 3).split(0)] == [(0, 3)]   # PyTorch's one case of 0
  with pytest.raises(ValueError, match="chunk: chunks must be a positive int, got 0"): t.chunk(0)
  with pytest.raises(ValueError, match="eye: n must be a non-negative int, got -1"): Tensor.eye(-1)
  with pytest.raises(ValueError, match="eye: m must be a non-negative int, got 2.5"): Tensor.eye(2, 2.5)
  np.testing.assert_array_equal(Tensor.eye(np.int64(2)).numpy(), np.eye(2))

def test_zero_element_layers_initialize():
  from alloy import nn
  layer = nn.Linear(0, 3)   # PyTorch's no-op init of an empty weight; the output is the bias
  np.testing.assert_array_equal(layer(Tensor(np.ones((2, 0), np.float32))).numpy(), np.broadcast_to(layer.bias.numpy(), (2, 3)))
  for init in (nn.init.kaiming_uniform_, nn.init.kaiming_normal_, nn.init.xavier_uniform_, nn.init.xavier_normal_):
    assert init(Tensor.empty(0, 4)).shape == (0, 4)

def test_index_errors():
  t = Tensor(np.ones((2, 3), np.float32))
  with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"): t[0, 3]
  with pytest.raises(IndexError, match="too many indices"): t[0, 0, 0]
  with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"): t[Tensor([0, 5])].numpy()
  with pytest.raises(IndexError, match="integer tensors"): t[Tensor([0.5])]
  with pytest.raises(IndexError, match=r"the shape of the mask \(3,\) at index 0 does not match the shape \(2,\)"): t[Tensor([True, False, True])]
  with pytest.raises(IndexError, match=r"the shape of the mask \(2,\) at index 1 does not match the shape \(3,\)"): t[:, [True, False]]

def test_cast_errors():
  with pytest.raises(TypeError, match="unknown dtype 'float7'"): Tensor([1.0]).cast("float7")
  with pytest.raises(TypeError, match="bitcast from float32"): Tensor([1.0]).bitcast(alloy.int8)
  with pytest.raises(TypeError, match="cannot build an int32 tensor from floating-point data"): Tensor([1.5], dtype="int32")
  with pytest.raises(TypeError, match="bitwise"): Tensor([1.5]) & Tensor([2.5])
  with pytest.raises(TypeError, match="mean: input dtype must be floating point"): Tensor([1, 2]).mean()

def test_device_errors():
  with pytest.raises(ValueError, match="unknown device 'TPU'"): Tensor([1.0], device="TPU")

def test_item_error():
  with pytest.raises(ValueError, match=r"item\(\) needs a tensor with one element"): Tensor([1.0, 2.0]).item()

def test_compile_error_carries_source_and_message():
  with pytest.raises(CompileError) as e:
    CPUCompiler().compile("void k(float* a) { a[0] = undefined_name; }")
  assert "undefined_name" in e.value.message and "void k" in e.value.source

def test_where_condition_error():
  x = Tensor(np.ones(3, np.float32))
  with pytest.raises(TypeError, match="where: the condition must be a Tensor, got bool"): x.where(True, 0.0)
  with pytest.raises(TypeError, match="where: the condition must be a Tensor, got ndarray"): alloy.where(np.ones(3, bool), x, 0.0)

def _run(code: str, **env):
  import os, subprocess, sys
  full = {**os.environ, **env}
  full.pop("DEV", None) if "DEV" not in env else None
  return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)

@pytest.mark.parametrize("env, code, message", [
  ({"JIT": "abc"}, "import alloy", "environment variable JIT='abc': expected int"),
  ({"DEBUG": "high"}, "import alloy", "environment variable DEBUG='high': expected int"),
  ({"ALLOY_METAL_SW_ORDER": "bogus"}, "import alloy.runtime.metal.software.options", "ALLOY_METAL_SW_ORDER='bogus': expected one of forward"),
  ({"CC": "/nonexistent/cc", "DEV": "CPU"}, "import alloy; (alloy.Tensor([1.0]) + 1).numpy()", "CC='/nonexistent/cc' names no C compiler"),
  ({"DEV": "TPU"}, "import alloy; alloy.Tensor([1.0])", "unknown device 'TPU'; choose one of CPU, CUDA, METAL"),
])
def test_bad_environment_is_named(env, code, message):
  proc = _run(code, **env)
  assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]

def test_a_missing_device_says_what_it_needs():
  from alloy.runtime.registry import device_available
  if device_available("CUDA"): pytest.skip("a CUDA device is present here")
  proc = _run("import alloy; alloy.Tensor([1.0], device='CUDA')")
  assert proc.returncode != 0 and "the CUDA device is not available here" in proc.stderr and "alloy[cuda]" in proc.stderr, proc.stderr[-2000:]
