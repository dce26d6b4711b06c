/* cmd_default.c -- the main job: what `tq` with no arguments does (README quick start).
 * Until the engine exists it is a short KV codec benchmark on built-in data. */
#include "cli.h"

int cmd_default(int argc, char **argv)
{
    char *args[] = {"kv-bench", "--quick", NULL};
    printf("tq: no command given; running the main job: tq kv-bench --quick "
           "(see `tq --help` for all commands)\n\n");
    return cmd_kv_bench(2, args);
}
