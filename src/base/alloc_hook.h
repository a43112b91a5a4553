// A count of the process's heap allocations, for "allocations per op" in the benchmarks and the
// tests that prove a loop allocates nothing. Only binaries that link the `trellis_alloc_hook`
// library count: it replaces the global operator new (every other binary keeps the library's).
#pragma once

#include <cstdint>

namespace trellis {

// Heap allocations (operator new) counted so far.
int64_t heap_allocations();

// While false, allocations made by the calling thread are not counted (a test's own thread).
void count_this_thread(bool counted);

}  // namespace trellis
