// The process's heap allocation counter (alloc_hook.cpp replaces the global operator new).
#pragma once

#include <cstdint>

namespace trellis::cli {

// Heap allocations (operator new) made by the process so far.
int64_t heap_allocations();

}  // namespace trellis::cli
