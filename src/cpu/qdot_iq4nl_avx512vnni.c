/* qdot_iq4nl_avx512vnni.c -- the AVX512-VNNI table of qdot_iq4nl.h: qdot_iq4nl_avx2.c's kernels
 * with the int8 dot done by vpdpbusd (256-bit, AVX512-VL): the same exact int32 lanes, so the
 * same bits as the scalar reference (tests/test_qdot_iq4nl.c). */
/* ISA flags: the _avx512vnni.c rule of CMakeLists.txt */
#define QDOT_VNNI 1
#include "qdot_iq4nl_avx2.c"
