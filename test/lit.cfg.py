# Lit configuration of the Tessera test suite (check-tessera).

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "TESSERA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessera_obj_root, "test")
config.excludes = ["CMakeLists.txt", "Inputs", "lit.cfg.py", "lit.site.cfg.py", "lib", "unit"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%tessera_src_root", config.tessera_src_root))
config.substitutions.append(("%tessera_obj_root", config.tessera_obj_root))
config.substitutions.append(("%tessera_tools_dir", config.tessera_tools_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.tessera_tools_dir, config.llvm_tools_dir]
tools = ["tessera-opt", "tessera"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# Multi-rank runs: OpenMPI refuses root without these (CI runs as root), and
# one BLAS thread per rank keeps oversubscribed ranks from fighting.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OPENBLAS_NUM_THREADS"] = "1"
# Each test's jobs get an OpenMPI session directory of their own: jobs of
# tests running in parallel share /tmp/ompi.<host>.<uid> otherwise, and one
# job's cleanup can remove it while another starts (open-mpi/ompi#8510).
# First in the list, so that lit expands the %t it contains.
config.substitutions.insert(
    0, ("%mpirun", "env OMPI_MCA_orte_tmpdir_base=%t.ompi mpirun --oversubscribe"))
tools.append("tessera-run")
llvm_config.add_tool_substitutions(["tessera-run"], tool_dirs)

# GPU tests: `REQUIRES: cuda-gpu` runs where the build has the CUDA backend
# and the machine a GPU; `cuda-multi-gpu` needs two (NCCL refuses two ranks
# on one GPU). Elsewhere they are reported unsupported.
import shutil
import subprocess

gpus = 0
if config.tessera_enable_cuda and shutil.which("nvidia-smi"):
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                 text=True, timeout=30)
        gpus = listing.stdout.count("GPU ")
    except (OSError, subprocess.SubprocessError):
        gpus = 0
if gpus >= 1:
    config.available_features.add("cuda-gpu")
if gpus >= 2:
    config.available_features.add("cuda-multi-gpu")

# ONNX import tests: a Python with the onnx package (Debian's python3-onnx,
# which a pyenv or venv python3 on PATH may not see), and PyTorch
# (python3-torch) for the models exported from it. Missing, the tests that
# use them fail rather than skip: CI installs both.
def find_python(modules):
    for python in ["/usr/bin/python3", shutil.which("python3")]:
        if python and subprocess.run(
                [python, "-c", "import " + ", ".join(modules)],
                capture_output=True).returncode == 0:
            return python
    return "python3"


config.substitutions.append(("%onnx-python", find_python(["onnx", "numpy"])))
config.substitutions.append(
    ("%torch-python", find_python(["onnx", "numpy", "torch"])))
config.substitutions.append(
    ("%onnx-testdata", "/usr/share/libonnx-testdata/data/node"))
