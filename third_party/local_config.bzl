"""Repository rules that bind the build to what is installed on the machine.

Nothing here downloads: TensorFlow, Python and pybind11 come from the
interpreter named by PYTHON_BIN_PATH (default: the workspace's .venv, which
scripts/setup.sh creates, else python3); gRPC, protobuf, abseil, snappy and zstd
come from Debian's packages through pkg-config.
"""

_QUERY = """
import sysconfig
import pybind11
import tensorflow as tf
print(tf.sysconfig.get_include())
print(tf.sysconfig.get_lib())
print(sysconfig.get_paths()["include"])
print(pybind11.get_include())
"""

def _python_configure_impl(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if not python:
        venv_python = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv").get_child("bin").get_child("python")
        python = str(venv_python) if venv_python.exists else "python3"
    result = ctx.execute([python, "-c", _QUERY])
    if result.return_code != 0:
        fail("cannot query %s for TensorFlow/pybind11 (set PYTHON_BIN_PATH to a Python " % python +
             "that has both, or run scripts/setup.sh): %s" % result.stderr)
    tf_include, tf_lib, python_include, pybind11_include = result.stdout.strip().split("\n")[-4:]
    ctx.symlink(tf_include, "tf_include")
    ctx.symlink(tf_lib + "/libtensorflow_framework.so.2", "libtensorflow_framework.so.2")
    ctx.symlink(python_include, "python_include")
    ctx.symlink(pybind11_include, "pybind11_include")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "tf_headers",
    hdrs = glob(["tf_include/**"]),
    includes = ["tf_include"],
    defines = ["EIGEN_MAX_ALIGN_BYTES=64", "_GLIBCXX_USE_CXX11_ABI=1"],
)
cc_import(name = "tf_framework", shared_library = "libtensorflow_framework.so.2")
cc_library(name = "python_headers", hdrs = glob(["python_include/**"]), includes = ["python_include"])
cc_library(name = "pybind11", hdrs = glob(["pybind11_include/**"]), includes = ["pybind11_include"], deps = [":python_headers"])
""")

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["PYTHON_BIN_PATH"],
    local = True,
)

# pkg-config modules per library target.
_LIBS = {
    "grpc": ["grpc++", "protobuf"],
    "protobuf": ["protobuf"],
    "snappy": ["snappy"],
    "zstd": ["libzstd"],
    "absl": [
        "absl_status",
        "absl_statusor",
        "absl_strings",
        "absl_str_format",
        "absl_synchronization",
        "absl_time",
        "absl_random_random",
        "absl_flat_hash_map",
        "absl_flat_hash_set",
        "absl_hash",
        "absl_flags",
        "absl_flags_parse",
    ],
}

def _system_libs_impl(ctx):
    build = ['package(default_visibility = ["//visibility:public"])']
    for name, modules in _LIBS.items():
        result = ctx.execute(["pkg-config", "--libs"] + modules)
        if result.return_code != 0:
            fail("pkg-config cannot find %s (run the README's set-up): %s" % (modules, result.stderr))
        build.append("cc_library(name = %r, linkopts = %r)" % (name, result.stdout.strip().split(" ")))
    ctx.file("BUILD", "\n".join(build) + "\n")

system_libs = repository_rule(implementation = _system_libs_impl, local = True)
