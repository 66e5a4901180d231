"""tools/check_kernel_launches.py: with programmatic dependent launch every kernel of
src/kernels/cuda must wait for its predecessor first. The real tree passes; a kernel without
grid_dependency_sync(), a <<<>>> launch outside the plain files, and launch_kernel (or
launch_kernel_in_clusters) inside one fail, naming the file and line."""

from conftest import REPO
from repo_scripts import load_script, write_file

launches = load_script("tools/check_kernel_launches.py")


def test_the_tree_passes():
    assert launches.check(REPO) == []


def test_every_kernel_is_checked(tmp_path):
    write_file(tmp_path, "src/kernels/cuda/a/good.cu",
               "// a comment with __global__ in it\n"
               "__global__ void k(int* x) {\n  grid_dependency_sync();\n  x[0] = 1;\n}\n"
               "void go(int* x) { launch_kernel(k, 1, 32, 0, 0, x); }\n")
    write_file(tmp_path, "src/kernels/cuda/a/bad.cuh",
               "template <int N>\n__global__ void late(int* x) {\n  x[0] = N;\n"
               "  grid_dependency_sync();\n}\n")
    write_file(tmp_path, "src/kernels/cuda/a/chevrons.cu",
               "__global__ void k2() {\n  grid_dependency_sync();\n}\nvoid go() { k2<<<1, 1, 0, 0>>>(); }\n")
    write_file(tmp_path, "src/kernels/cuda/probe.cu",
               "__global__ void p() {}\nvoid go() { launch_kernel(p, 1, 1, 0, 0); }\n")
    write_file(tmp_path, "src/kernels/cuda/init/random_fill.cu",
               "__global__ void f() {}\n\nvoid go() { launch_kernel_in_clusters(f, 8, 1, 8, 0, 0); }\n")
    errors = launches.check(tmp_path)
    assert sorted(errors) == [
        "src/kernels/cuda/a/bad.cuh:2: a kernel must begin with grid_dependency_sync() "
        "(programmatic dependent launch)",
        "src/kernels/cuda/a/chevrons.cu:4: a <<<...>>> launch: use launch_kernel (common.cuh), or "
        "add the file to PLAIN in tools/check_kernel_launches.py",
        "src/kernels/cuda/init/random_fill.cu:3: launch_kernel in a PLAIN file (its kernels do not "
        "wait)",
        "src/kernels/cuda/probe.cu:2: launch_kernel in a PLAIN file (its kernels do not wait)",
    ], errors
