// Counts the process's heap allocations, for the benchmarks' "allocations per op": the global
// operator new is replaced by one that counts, then calls malloc (sanitizers still see every
// allocation through malloc). Aligned allocations keep the library's own operators and are not
// counted; nothing in the engine's hot path uses them.
#include "base/alloc_hook.h"

#include <atomic>
#include <cstdlib>
#include <new>

// GCC inlines library deallocations into the replaced operator delete below and then sees free()
// meet what it takes for its own operator new; both are replaced here, so they do match.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<int64_t> g_heap_allocations{0};
thread_local bool t_uncounted = false;

void count_one() {
  if (!t_uncounted) g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

namespace trellis {
int64_t heap_allocations() {
  return g_heap_allocations.load(std::memory_order_relaxed);
}
void count_this_thread(bool counted) {
  t_uncounted = !counted;
}
}  // namespace trellis

void* operator new(std::size_t size) {
  count_one();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
// The nothrow forms too: every form that pairs with the deletes above must allocate with malloc
// (a sanitizer's own nothrow new would otherwise meet our free).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  count_one();
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
