// The AVX2 kernel table (its rows are in kernels_avx2.h, where the AVX512 table finds them too).
#include "kernels/x86/kernels_avx2.h"

namespace trellis::kernels_detail {

// A constant: nothing of it runs, so no code compiled for AVX2 is emitted here.
const KernelTable& avx2_kernels() {
  static constexpr KernelTable kTable = make_avx2_table();
  return kTable;
}

}  // namespace trellis::kernels_detail
