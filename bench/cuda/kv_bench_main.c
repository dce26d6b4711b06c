/* kv_bench_main.c -- standalone `tq kv-bench --cuda` for the GPU machine, where the full CMake
 * build (json-c, pcre2) may not configure: bench/cuda/build.sh links it with the core, kv and
 * cuda sources only. Same code path as `tq kv-bench --cuda`. */
#include "../../tools/cli.h"

int main(int argc, char **argv)
{
    return cmd_kv_bench_cuda(argc, argv);
}
