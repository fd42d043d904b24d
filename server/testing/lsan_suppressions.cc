// LeakSanitizer suppressions for the C++ tests under --config=asan: leaks
// inside Debian's system libraries that tests cannot free (c-ares, which
// gRPC uses to resolve names, keeps per-process allocations until exit).
// The hook is only consulted by the sanitizer runtime; elsewhere it is an
// unused function.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcares.so\n"; }
