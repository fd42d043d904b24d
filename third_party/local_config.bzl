"""Repository rules that bind the build to what is installed on the machine.

Nothing here downloads. Python and pybind11 headers come from the interpreter
named by PYTHON_BIN_PATH (default: the workspace's .venv, which
scripts/setup.sh creates, else python3). TensorFlow comes from one or more
build kits: TF_REVERB_TF_KITS (space-separated directories that
scripts/make_tf_kit.py wrote: headers, libtensorflow_framework.so.2, version
and defines; scripts/build_wheel.sh makes one per TensorFlow minor), else the
TensorFlow of that same interpreter; one kernel library per TensorFlow minor. gRPC,
protobuf, abseil, snappy, zstd, zlib and prometheus-cpp come from Debian's packages through
pkg-config.
"""

def _default_python(ctx):
    """PYTHON_BIN_PATH, else the workspace's .venv Python, else python3."""
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if python:
        return python
    venv_python = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv").get_child("bin").get_child("python")
    return str(venv_python) if venv_python.exists else "python3"

# Each answer line is tagged: importing TensorFlow may print to stdout too.
_PYTHON_QUERY = """
import sysconfig
import pybind11
print("CFG:" + sysconfig.get_paths()["include"])
print("CFG:" + pybind11.get_include())
"""

def _words(text):
    return [word for word in text.replace("\t", " ").replace("\n", " ").split(" ") if word]

def _query(ctx, python, script, what):
    result = ctx.execute([python, "-c", script])
    if result.return_code != 0:
        fail("cannot query %s for %s (set PYTHON_BIN_PATH to " % (python, what) +
             "an interpreter that has it, or run scripts/setup.sh): %s" % result.stderr)
    return [line[len("CFG:"):] for line in result.stdout.split("\n") if line.startswith("CFG:")]

def _python_configure_impl(ctx):
    python_include, pybind11_include = _query(ctx, _default_python(ctx), _PYTHON_QUERY, "pybind11")
    ctx.symlink(python_include, "python_include")
    ctx.symlink(pybind11_include, "pybind11_include")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "python_headers", hdrs = glob(["python_include/**"]), includes = ["python_include"])
cc_library(name = "pybind11", hdrs = glob(["pybind11_include/**"]), includes = ["pybind11_include"], deps = [":python_headers"])
""")

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["PYTHON_BIN_PATH"],
    local = True,
)

_TF_QUERY = """
import tensorflow as tf
print("CFG:" + tf.__version__)
print("CFG:" + tf.sysconfig.get_include())
print("CFG:" + tf.sysconfig.get_lib())
print("CFG:" + " ".join(f[2:] for f in tf.sysconfig.get_compile_flags() if f.startswith("-D")))
"""

def _tf_sources(ctx):
    """(origin, version, include dir, lib dir, defines) per TensorFlow to build for."""
    kits = _words(ctx.os.environ.get("TF_REVERB_TF_KITS", ""))
    if not kits:
        python = _default_python(ctx)
        version, include, lib, defines = _query(ctx, python, _TF_QUERY, "TensorFlow")
        return [(python, version, include, lib, defines)]
    sources = []
    for kit in kits:
        config = ctx.path(kit + "/tf_config.txt")
        if not config.exists:
            fail("TF_REVERB_TF_KITS: %s is no complete kit (no tf_config.txt; " % kit +
                 "scripts/make_tf_kit.py writes one)")
        lines = ctx.read(config).split("\n")
        sources.append((kit, lines[0].strip(), kit + "/include", kit, lines[1] if len(lines) > 1 else ""))
    return sources

def _tf_configure_impl(ctx):
    versions = {}
    for origin, version, include, lib, defines in _tf_sources(ctx):
        major_minor = "_".join(version.split(".")[:2])
        if major_minor in versions:
            fail("TF_REVERB_TF_KITS: %s and %s both have TensorFlow %s" %
                 (versions[major_minor][0], origin, version))
        versions[major_minor] = (origin, version)
        package = "tf" + major_minor
        ctx.symlink(include, package + "/include")
        ctx.symlink(lib + "/libtensorflow_framework.so.2", package + "/libtensorflow_framework.so.2")
        ctx.file(package + "/BUILD", """# TensorFlow %s of %s.
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "tf_headers",
    hdrs = glob(["include/**"], exclude = ["include/**/*.so", "include/**/*.so.*"]),
    includes = ["include"],
    defines = %r,
)
cc_import(name = "tf_framework", shared_library = "libtensorflow_framework.so.2")
""" % (version, origin, _words(defines)))
    ctx.file("BUILD", 'exports_files(["versions.bzl"])\n')
    ctx.file("versions.bzl", "\n".join([
        '"""TensorFlow versions the kernels are built for: "<major>_<minor>" -> full version."""',
        "TF_VERSIONS = {",
    ] + ["    %r: %r," % (key, versions[key][1]) for key in sorted(versions)] + ["}", ""]))

# @local_config_tf//tf<major>_<minor>:{tf_headers,tf_framework} per TensorFlow,
# and @local_config_tf//:versions.bzl (TF_VERSIONS) listing them.
tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["PYTHON_BIN_PATH", "TF_REVERB_TF_KITS"],
    local = True,
)

# pkg-config modules per library target.
_LIBS = {
    "grpc": ["grpc++", "protobuf"],
    "protobuf": ["protobuf"],
    "snappy": ["snappy"],
    "zstd": ["libzstd"],
    "zlib": ["zlib"],
    "prometheus": ["prometheus-cpp-pull", "prometheus-cpp-core"],
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
        linkopts = result.stdout.strip().split(" ")
        if name == "absl":
            # Everything that links abseil gets this start-up setting (see the file).
            ctx.symlink(Label("//third_party:absl_mutex_release_mode.cc"), "absl_mutex_release_mode.cc")
            build.append("cc_library(name = %r, srcs = [\"absl_mutex_release_mode.cc\"], linkopts = %r, alwayslink = True)" % (name, linkopts))
        else:
            build.append("cc_library(name = %r, linkopts = %r)" % (name, linkopts))
    ctx.file("BUILD", "\n".join(build) + "\n")

system_libs = repository_rule(implementation = _system_libs_impl, local = True)
