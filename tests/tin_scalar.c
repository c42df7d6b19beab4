/* A third copy of the mesher for test_tin_isa: compiled without __SSE2__ (CMakeLists.txt), so it
 * takes the plain C paths that builds for other processors run. */
#define TIN_VARIANT tin_build_scalar
#include "tin.c"
