/* The mesher compiled a second time for AVX2-class x86-64 CPUs (AVX2, BMI1/2, POPCNT; CMakeLists.txt
 * gives this file those flags and no FMA, so every double is rounded as in the portable build and
 * the meshes are the same). terra_tin_build (tin.c) runs it where the CPU has them. */
#if defined(__AVX2__) && defined(__BMI2__) && defined(__POPCNT__)
#define TIN_VARIANT tin_build_avx2
#include "tin.c"
#else
typedef int tin_avx2_not_built; /* an empty file is not valid C */
#endif
