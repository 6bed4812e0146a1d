// XXH3 for the project's own target: see checksum_variants.h.
#define RY_XXH3_VARIANT_FUNCTION Xxh3Baseline
#include "railyard/base/checksum_xxh3.inc"
