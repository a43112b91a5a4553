#include "kernels/kv_codec.h"

#include "quant/quant.h"

namespace trellis {
namespace {

DType row_dtype(KvType type) {
  switch (type) {
    case KvType::F16:
      return DType::F16;
    case KvType::F32:
      return DType::F32;
    case KvType::Q8_0:
      return DType::Q8_0;
    case KvType::Q4_0:
      return DType::Q4_0;
  }
  return DType::F32;
}

}  // namespace

void kv_encode_row(KvType type, const float* x, uint8_t* row, int64_t n) {
  quantize_row(row_dtype(type), x, row, n);
}

void kv_decode_row(KvType type, const uint8_t* row, float* out, int64_t n) {
  dequantize_row(row_dtype(type), row, out, n);
}

}  // namespace trellis
