// Element types and reduction operations of Railyard's host-memory collectives.
//
// Types: f32, f64, f16 (IEEE binary16), bf16 (bfloat16), i32, i64, u8. Operations: sum,
// prod, min, max, avg (sum, then divided by the rank count when the result is final;
// integer types divide with truncation). Half types are reduced in float and rounded back to
// nearest-even, so every rank that reduces the same operands gets the same bits.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::comm {

enum class DataType { kF32, kF64, kF16, kBF16, kI32, kI64, kU8 };
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

size_t SizeOf(DataType type);
std::string_view DataTypeName(DataType type);  // "f32" ... (nccl-tests prints "float"; see bench)
std::string_view ReduceOpName(ReduceOp op);    // "sum" ...
// Accepts the names above and the nccl-tests spellings (float, double, half, bfloat16,
// int32, int64, uint8). INVALID_ARGUMENT lists the valid names.
Result<DataType> ParseDataType(std::string_view text);
Result<ReduceOp> ParseReduceOp(std::string_view text);

// a (op) b in double, kAvg summing (FinishAverage divides later): the reference value tests
// and the benchmark's check compute expected results with.
double ReduceScalar(ReduceOp op, double a, double b);

// out[i] = a[i] (op) b[i] for i < count; avg accumulates like sum. `out` may be `a` (in
// place); otherwise the three ranges must not overlap.
void Reduce(DataType type, ReduceOp op, void* out, const void* a, const void* b, size_t count);

// For avg: divides count elements by `ranks` in place. No-op for other operations.
void FinishAverage(DataType type, ReduceOp op, void* data, size_t count, int ranks);

// Writes `value` (rounded as the type requires) as element i of an array of `type`; for
// test data and the benchmark's known inputs.
void StoreValue(DataType type, void* base, size_t i, double value);

// Conversions used by the half types (exposed for tests and the benchmark's data).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t b);
uint16_t FloatToBf16(float f);

}  // namespace railyard::comm
