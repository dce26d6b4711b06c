/* rand_gguf.c -- write a random-weight llama GGUF of SmolLM2-135M's shape (tests/rand_gguf.h) for
 * GPU benchmarks that need a real-sized model without carrying one to the GPU machine.
 * usage: rand_gguf PATH [q8_0|q4_0|q4_1|f32 [LAYERS [SEED]]] (default q8_0, 30, 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tests/rand_gguf.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rand_gguf PATH [q8_0|q4_0|q4_1|f32 [LAYERS [SEED]]]\n");
        return 2;
    }
    const char *ty = argc > 2 ? argv[2] : "q8_0";
    const int type = !strcmp(ty, "q4_0") ? TQ_GGML_Q4_0 : !strcmp(ty, "q4_1") ? TQ_GGML_Q4_1
                   : !strcmp(ty, "f32")  ? TQ_GGML_F32  : TQ_GGML_Q8_0;
    const int layers = argc > 3 ? atoi(argv[3]) : 30;
    const uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    const tq_status st = rand_gguf_write(argv[1], type, layers, seed);
    if (st) {
        fprintf(stderr, "rand_gguf: %s\n", tq_last_error());
        return 1;
    }
    printf("rand_gguf: %s (%s, %d layers, seed %llu)\n", argv[1], ty, layers, (unsigned long long)seed);
    return 0;
}
