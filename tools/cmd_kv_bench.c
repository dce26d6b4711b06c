/* cmd_kv_bench.c -- placeholder until the KV codec lands (issue: KV codec). */
#include "cli.h"

int cmd_kv_bench(int argc, char **argv)
{
    return cli_error("kv-bench", TQ_OK, "the KV codec is not built yet");
}
