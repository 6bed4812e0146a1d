// Reduction kernels. Loops are written so the compiler vectorizes them (this file is built
// with -O3): one plain loop per (type, operation), no branches inside.
#include "railyard/comm/types.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace railyard::comm {
namespace {

struct TypeName {
  DataType type;
  std::string_view name, alias;
};
constexpr TypeName kTypes[] = {
    {DataType::kF32, "f32", "float"}, {DataType::kF64, "f64", "double"},
    {DataType::kF16, "f16", "half"},  {DataType::kBF16, "bf16", "bfloat16"},
    {DataType::kI32, "i32", "int32"}, {DataType::kI64, "i64", "int64"},
    {DataType::kU8, "u8", "uint8"},
};
constexpr std::string_view kOps[] = {"sum", "prod", "min", "max", "avg"};

// Two loops, in place and out of place, so that neither needs an aliasing check.
template <typename T, typename F>
void Apply(void* out, const void* a, const void* b, size_t n, F f) {
  if (out == a) {
    T* __restrict x = static_cast<T*>(out);
    const T* __restrict y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) x[i] = f(x[i], y[i]);
    return;
  }
  T* __restrict o = static_cast<T*>(out);
  const T* __restrict x = static_cast<const T*>(a);
  const T* __restrict y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

template <typename T>
void ReduceNative(ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return Apply<T>(out, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
    case ReduceOp::kProd:
      return Apply<T>(out, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
    case ReduceOp::kMin:
      return Apply<T>(out, a, b, n, [](T x, T y) { return y < x ? y : x; });
    case ReduceOp::kMax:
      return Apply<T>(out, a, b, n, [](T x, T y) { return x < y ? y : x; });
  }
}

// Half types: widen a block to float, reduce, narrow back.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void ReduceHalf(ReduceOp op, void* out, const void* in_a, const void* in_b, size_t n) {
  constexpr size_t kBlock = 1024;
  float a[kBlock], b[kBlock];
  auto* po = static_cast<uint16_t*>(out);
  auto* pa = static_cast<const uint16_t*>(in_a);
  auto* pb = static_cast<const uint16_t*>(in_b);
  for (size_t off = 0; off < n; off += kBlock) {
    size_t m = std::min(kBlock, n - off);
    for (size_t i = 0; i < m; ++i) a[i] = ToF(pa[off + i]);
    for (size_t i = 0; i < m; ++i) b[i] = ToF(pb[off + i]);
    ReduceNative<float>(op, a, a, b, m);
    for (size_t i = 0; i < m; ++i) po[off + i] = FromF(a[i]);
  }
}

template <typename T>
void Divide(void* data, size_t n, int ranks) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(ranks));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void DivideHalf(void* data, size_t n, int ranks) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / static_cast<float>(ranks));
}

}  // namespace

size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kF32:
    case DataType::kI32:
      return 4;
    case DataType::kF64:
    case DataType::kI64:
      return 8;
    case DataType::kF16:
    case DataType::kBF16:
      return 2;
    case DataType::kU8:
      return 1;
  }
  return 1;
}

std::string_view DataTypeName(DataType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "?";
}

std::string_view ReduceOpName(ReduceOp op) { return kOps[static_cast<int>(op)]; }

Result<DataType> ParseDataType(std::string_view text) {
  std::string names;
  for (const auto& t : kTypes) {
    if (text == t.name || text == t.alias) return t.type;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", t.name);
  }
  return InvalidArgument("unknown data type '{}'; expected one of {}", text, names);
}

Result<ReduceOp> ParseReduceOp(std::string_view text) {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (text == kOps[i]) return static_cast<ReduceOp>(i);
  }
  return InvalidArgument("unknown reduction '{}'; expected one of sum, prod, min, max, avg", text);
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalize.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t FloatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) {  // inf or nan
    return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);
  }
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000) {                       // below the smallest normal half
    if (abs < 0x33000000) return sign;          // rounds to zero
    uint32_t mant = (abs & 0x7fffff) | 0x800000;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - (112u << 10));
  uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float Bf16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t FloatToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

void StoreValue(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::kF32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DataType::kF64:
      static_cast<double*>(base)[i] = v;
      break;
    case DataType::kF16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBF16:
      static_cast<uint16_t*>(base)[i] = FloatToBf16(static_cast<float>(v));
      break;
    case DataType::kI32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DataType::kI64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kU8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
  }
}

double ReduceScalar(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
  }
  return a;
}

void Reduce(DataType type, ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  switch (type) {
    case DataType::kF32:
      return ReduceNative<float>(op, out, a, b, n);
    case DataType::kF64:
      return ReduceNative<double>(op, out, a, b, n);
    case DataType::kI32:
      return ReduceNative<int32_t>(op, out, a, b, n);
    case DataType::kI64:
      return ReduceNative<int64_t>(op, out, a, b, n);
    case DataType::kU8:
      return ReduceNative<uint8_t>(op, out, a, b, n);
    case DataType::kF16:
      return ReduceHalf<HalfToFloat, FloatToHalf>(op, out, a, b, n);
    case DataType::kBF16:
      return ReduceHalf<Bf16ToFloat, FloatToBf16>(op, out, a, b, n);
  }
}

void FinishAverage(DataType type, ReduceOp op, void* data, size_t count, int ranks) {
  if (op != ReduceOp::kAvg || ranks <= 1) return;
  switch (type) {
    case DataType::kF32:
      return Divide<float>(data, count, ranks);
    case DataType::kF64:
      return Divide<double>(data, count, ranks);
    case DataType::kI32:
      return Divide<int32_t>(data, count, ranks);
    case DataType::kI64:
      return Divide<int64_t>(data, count, ranks);
    case DataType::kU8:
      return Divide<uint8_t>(data, count, ranks);
    case DataType::kF16:
      return DivideHalf<HalfToFloat, FloatToHalf>(data, count, ranks);
    case DataType::kBF16:
      return DivideHalf<Bf16ToFloat, FloatToBf16>(data, count, ranks);
  }
}

}  // namespace railyard::comm
