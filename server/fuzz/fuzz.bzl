"""fuzz_target: a libFuzzer binary plus a cc_test replaying its seed corpus."""

def fuzz_target(name, deps = []):
    """<name>.cc defines LLVMFuzzerTestOneInput; corpus/<name>/ holds its seeds.

    Creates :<name> (libFuzzer's main under --config=fuzz, replay_main.cc
    elsewhere) and :<name>_corpus_test (the seeds through replay_main.cc).
    """
    native.cc_library(
        name = name + "_lib",
        srcs = [name + ".cc"],
        deps = deps + [":fuzz_support"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        deps = [":" + name + "_lib"] + select({
            ":libfuzzer": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        args = ["server/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [":" + name + "_lib", ":replay_main"],
    )
