"""alloy.save / alloy.load through safetensors: a Module's state dict round trip on every device, files written by
safetensors.torch.save_file (bfloat16 and float16 included) load bit for bit, files alloy writes load in torch bit for
bit, and a missing, truncated or corrupt file, or a bad value, raises a clear error."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn
from conftest import supported

torch = pytest.importorskip("torch")
st = pytest.importorskip("safetensors.torch")

def _bits(t: "torch.Tensor") -> np.ndarray:
  return t.view(torch.int16).numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()

def _alloy_bits(t: Tensor) -> np.ndarray:
  return t.bitcast("int16").numpy() if t.dtype in (alloy.bfloat16, alloy.float16) else t.numpy()

def test_module_round_trip(device, tmp_path):
  net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2))).to(device)
  path = tmp_path / "net.safetensors"
  alloy.save(net.state_dict(), path)
  loaded = alloy.load(path, device=device)
  assert set(loaded) == {"0.weight", "0.bias", "2.0.weight", "2.0.bias"}
  assert all(t.device == device for t in loaded.values())
  other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2))).to(device)
  other.load_state_dict(loaded)
  x = Tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32), device=device)
  np.testing.assert_array_equal(other(x).numpy(), net(x).numpy())
  alloy.save(net, tmp_path / "module.safetensors")   # a Module saves its state dict
  assert set(alloy.load(tmp_path / "module.safetensors")) == set(loaded)

@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64", "int64", "int32", "int8", "uint8", "bool"])
def test_torch_written_file_loads_unchanged(device, tmp_path, dtype):
  if not supported(device, [dtype]): pytest.skip(f"{device} has no {dtype}")
  g = torch.Generator().manual_seed(0)
  tt = torch.randn(3, 5, generator=g) * 100
  sd = {"model.layers.0.weight": tt.to(getattr(torch, dtype)), "scalar": torch.tensor(2.5).to(getattr(torch, dtype)),
        "empty": torch.zeros(0, 4).to(getattr(torch, dtype))}
  st.save_file(sd, tmp_path / "t.safetensors", metadata={"format": "pt"})
  loaded = alloy.load(tmp_path / "t.safetensors", device=device)
  for k, v in sd.items():
    assert loaded[k].dtype.name == dtype and loaded[k].shape == tuple(v.shape)
    np.testing.assert_array_equal(_alloy_bits(loaded[k]), _bits(v))
  assert alloy.state.load_metadata(tmp_path / "t.safetensors") == {"format": "pt"}

@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "int64", "bool"])
def test_alloy_written_file_loads_in_torch_unchanged(device, tmp_path, dtype):
  rng = np.random.default_rng(1)
  values = rng.standard_normal((4, 6)) * 10
  t = Tensor(values.astype(np.float32), device=device).cast(dtype) if dtype != "bool" else Tensor(values > 0, device=device)
  alloy.save({"a.b": t, "c": Tensor(np.arange(3, dtype=np.int32), device=device)}, tmp_path / "a.safetensors", metadata={"k": "v"})
  back = st.load_file(tmp_path / "a.safetensors")
  assert str(back["a.b"].dtype) == f"torch.{dtype}"
  np.testing.assert_array_equal(_bits(back["a.b"]), _alloy_bits(t))
  np.testing.assert_array_equal(back["c"].numpy(), np.arange(3, dtype=np.int32))

def test_numpy_values_and_views(tmp_path):
  base = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
  alloy.save({"view": base.T[1:3], "np": np.arange(5, dtype=np.int16)}, tmp_path / "v.safetensors")
  out = alloy.load(tmp_path / "v.safetensors")
  np.testing.assert_array_equal(out["view"].numpy(), np.arange(24, dtype=np.float32).reshape(4, 6).T[1:3])
  assert out["np"].dtype is alloy.int16

def test_bad_files_raise_clear_errors(tmp_path):
  path = tmp_path / "good.safetensors"
  alloy.save({"w": Tensor(np.ones((8, 8), np.float32))}, path)
  data = path.read_bytes()
  cases = {"truncated data": data[:-7], "truncated header": data[:20], "tiny": data[:3], "empty": b"",
           "garbage header": b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": nonsense}", "huge header length": b"\xff" * 8 + data[8:],
           "random bytes": np.random.default_rng(0).integers(0, 256, 300).astype(np.uint8).tobytes()}
  for what, content in cases.items():
    bad = tmp_path / f"{what}.safetensors"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="is not a valid safetensors file"): alloy.load(bad)
  with pytest.raises(FileNotFoundError): alloy.load(tmp_path / "missing.safetensors")

def test_bad_values_raise_clear_errors(tmp_path):
  p = tmp_path / "x.safetensors"
  with pytest.raises(TypeError, match="'w' is a list"): alloy.save({"w": [1, 2]}, p)
  with pytest.raises(TypeError, match="nested mapping; flatten it to dotted names"): alloy.save({"block": {"w": Tensor.ones(2)}}, p)
  with pytest.raises(TypeError, match="names must be strings"): alloy.save({1: Tensor.ones(2)}, p)
  with pytest.raises(TypeError, match="expected a state dict"): alloy.save([Tensor.ones(2)], p)
  with pytest.raises(TypeError, match="metadata must map strings to strings"): alloy.save({"w": Tensor.ones(2)}, p, metadata={"a": 1})

def test_load_state_dict_names_the_bad_keys(tmp_path):
  lin = nn.Linear(3, 2)
  st.save_file({"weight": torch.zeros(2, 4), "bias": torch.zeros(2), "extra": torch.zeros(1)}, tmp_path / "s.safetensors")
  with pytest.raises(RuntimeError, match=r"(?s)Unexpected key\(s\) in state_dict: 'extra'.*size mismatch for weight"):
    lin.load_state_dict(alloy.load(tmp_path / "s.safetensors"))

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_hugging_face_save_pretrained_loads_unchanged(tmp_path, dtype):
  transformers = pytest.importorskip("transformers")
  cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=16, vocab_size=64, bos_token_id=0, eos_token_id=0)
  model = transformers.GPT2LMHeadModel(cfg).to(getattr(torch, dtype))
  model.save_pretrained(tmp_path, safe_serialization=True)
  loaded = alloy.load(tmp_path / "model.safetensors")
  theirs = {k: v for k, v in model.state_dict().items() if k in loaded}
  assert "transformer.h.1.attn.c_attn.weight" in loaded and len(theirs) == len(loaded)
  for k, v in theirs.items():
    assert loaded[k].dtype.name == dtype and loaded[k].shape == tuple(v.shape), k
    np.testing.assert_array_equal(_alloy_bits(loaded[k]), _bits(v.contiguous()), err_msg=k)
