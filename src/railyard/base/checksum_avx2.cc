// XXH3 compiled with -mavx2 (base/CMakeLists.txt): see checksum_variants.h. Only
// checksum_xxh3.inc may be included here.
#ifndef __AVX2__
#error "checksum_avx2.cc must be compiled with -mavx2"
#endif
#define RY_XXH3_VARIANT_FUNCTION Xxh3Avx2Unchecked
#include "railyard/base/checksum_xxh3.inc"
