"""Minimal ELF64 reader for kernel shared objects built through the software Metal shim.

It finds, without loading the object: the exported kernel entries (``mtl_entry_<name>``), their
positional argument counts (``mtl_nargs_<name>``, a 4-byte constant), the positional slots each may write
(``mtl_writes_<name>`` for positional arguments, ``mtl_buffer_writes_<name>`` for [[buffer(n)]] ones: 4-byte bit
masks of the arguments not declared const), the [[buffer(n)]] slots each declares (``mtl_buffer_uses_<name>``), the sync marker
(``mtl_uses_sync_marker``) and the thread-local (threadgroup memory) symbols.
"""
from __future__ import annotations
import re, struct
from dataclasses import dataclass, field

SHT_SYMTAB, SHT_DYNSYM, SHT_NOBITS = 2, 11, 8
STT_TLS = 6
PT_TLS = 7

@dataclass
class ObjectInfo:
  entries: dict[str, int] = field(default_factory=dict)  # kernel name -> positional argument count
  writes: dict[str, int] = field(default_factory=dict)   # kernel name -> bit mask of the slots it may write
  buffer_slots: dict[str, int] = field(default_factory=dict)   # kernel name -> bit mask of its [[buffer(n)]] slots
  uses_sync: bool = False
  tls_symbols: list[tuple[str, int]] = field(default_factory=list)
  tls_memsz: int = 0
  def threadgroup_memory(self, kernel: str) -> int:
    """Bytes of threadgroup memory the kernel declares (function-local thread_local statics)."""
    pat = re.compile(r"_ZZL?%d%s" % (len(kernel), re.escape(kernel)))
    local = [s for n, s in self.tls_symbols if n.startswith("_ZZ")]
    mine = [s for n, s in self.tls_symbols if pat.match(n)]
    if not mine and local and len(self.entries) <= 1: mine = local
    return sum((s + 15) // 16 * 16 for s in mine)

def parse(data: bytes) -> ObjectInfo:
  if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    raise ValueError("not a little-endian ELF64 shared object")
  e_phoff, e_shoff = struct.unpack_from("<QQ", data, 0x20)
  e_phentsize, e_phnum, e_shentsize, e_shnum, _ = struct.unpack_from("<HHHHH", data, 0x36)
  info = ObjectInfo()
  for i in range(e_phnum):
    p_type, _, _, _, _, _, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", data, e_phoff + i * e_phentsize)
    if p_type == PT_TLS: info.tls_memsz = p_memsz
  secs = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
  def cstr(off: int) -> str:
    end = data.index(b"\0", off)
    return data[off:end].decode("utf-8", "replace")
  def symbols(sec):
    _, _, _, _, off, size, link, _, _, entsize = sec
    stroff = secs[link][4]
    for j in range(size // (entsize or 24)):
      st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off + j * 24)
      yield cstr(stroff + st_name), st_info & 0xF, st_shndx, st_value, st_size
  def read_i32(vaddr: int) -> int | None:
    for s in secs:
      _, sh_type, _, sh_addr, sh_offset, sh_size = s[:6]
      if sh_type != SHT_NOBITS and sh_addr <= vaddr < sh_addr + sh_size:
        return struct.unpack_from("<i", data, sh_offset + vaddr - sh_addr)[0]
    return None
  nargs: dict[str, int] = {}
  writes: dict[str, int | None] = {}
  entries: list[str] = []
  for sec in secs:
    if sec[1] == SHT_DYNSYM:
      for name, _, shndx, value, _ in symbols(sec):
        if shndx == 0: continue
        if name.startswith("mtl_entry_"): entries.append(name[len("mtl_entry_"):])
        elif name.startswith("mtl_nargs_"): nargs[name[len("mtl_nargs_"):]] = read_i32(value)
        elif name.startswith(("mtl_writes_", "mtl_buffer_writes_")):   # positional slots, [[buffer(n)]] slots
          kernel = name.partition("writes_")[2]
          writes[kernel] = (writes.get(kernel) or 0) | (read_i32(value) or 0)
        elif name.startswith("mtl_buffer_uses_"): info.buffer_slots[name[len("mtl_buffer_uses_"):]] = read_i32(value) or 0
        elif name == "mtl_uses_sync_marker": info.uses_sync = True
    elif sec[1] == SHT_SYMTAB:
      for name, typ, shndx, _, size in symbols(sec):
        if typ == STT_TLS and shndx != 0: info.tls_symbols.append((name, size))
  for e in entries:
    info.entries[e] = nargs.get(e, 0) or 0
    if (mask := writes.get(e)) is not None: info.writes[e] = mask & 0xFFFFFFFF
  return info
