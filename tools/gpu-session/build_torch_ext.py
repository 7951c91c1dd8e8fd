"""Builds src/torch against this machine's torch (the device image's), linked
to .gpu/libcoil.so.0; makes torch_names.h as src/torch/meson.build does."""
import glob, os, subprocess, sys, time
from torch.utils.cpp_extension import load, include_paths
root = os.path.abspath(sys.argv[1]); out = sys.argv[2]
os.makedirs(out, exist_ok=True)
gpu = os.path.join(root, ".gpu")
gen = os.path.join(out, "gen"); os.makedirs(gen, exist_ok=True)
inc = sum((["-isystem", p] for p in include_paths()), [])
def compiles(code):
    r = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", "-x", "c++", "-"] + inc,
                       input=code, text=True, capture_output=True)
    return r.returncode == 0
premul = "PreMulSumSupplement" if compiles(
    "#include <torch/csrc/distributed/c10d/Types.hpp>\nc10d::PreMulSumSupplement* p = nullptr;\n") \
    else "NCCLPreMulSumSupplement"
ops = compiles("#include <torch/csrc/distributed/c10d/Work.hpp>\n"
               "auto t = c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED;\n")
text = open(os.path.join(root, "src/torch/torch_names.h.in")).read()
text = text.replace("@PREMUL_SUPPLEMENT@", premul)
text = text.replace("@ALLGATHER_COALESCED_OP@", "ALLGATHER_INTO_TENSOR_COALESCED" if ops else "COALESCED")
text = text.replace("@REDUCE_SCATTER_COALESCED_OP@", "REDUCE_SCATTER_TENSOR_COALESCED" if ops else "COALESCED")
open(os.path.join(gen, "torch_names.h"), "w").write(text)
print(f"torch_names: {premul}, coalesced op types: {ops}", flush=True)
t0 = time.time()
load(name="_coil_torch_ext", sources=sorted(glob.glob(os.path.join(root, "src/torch/*.cc"))),
     extra_include_paths=[os.path.join(root, "include"), os.path.join(root, "src/torch"), gen],
     extra_cflags=["-O2", "-g", "-std=c++20", "-fvisibility=hidden"],
     extra_ldflags=["-Wl,--exclude-libs,ALL", f"-L{gpu}", "-l:libcoil.so.0", f"-Wl,-rpath,{gpu}"],
     build_directory=out, verbose=False)
print(f"torch ext built in {time.time() - t0:.0f} s:", glob.glob(os.path.join(out, "*.so")))
# What the toolchain made of libstdc++ (an H100 session's ext exported a
# static copy of parts of it, which libcoil's calls then bound to).
so = glob.glob(os.path.join(out, "*.so"))[0]
r = subprocess.run(["g++", "-print-file-name=libstdc++.so"], text=True, capture_output=True)
print("g++ libstdc++.so:", r.stdout.strip())
r = subprocess.run(["nm", "-D", "--defined-only", so], text=True, capture_output=True)
print("libstdc++ symbols the ext exports:", sum(1 for l in r.stdout.splitlines() if " _ZNSo" in l or " _ZNSt" in l))
