/* bench_main.c -- standalone `tq bench --cuda` for the GPU machine (bench/cuda/build.sh with
 * TQ_FULL=1 links it with the whole library but without the other tq commands). Same code path as
 * `tq bench --cuda`. */
#include "../../tools/cli.h"

int main(int argc, char **argv)
{
    return cmd_bench_cuda(argc, argv);
}
