/* turboquant/tokenizer.h -- included by turboquant.h only. */
#ifndef TURBOQUANT_TOKENIZER_H
#define TURBOQUANT_TOKENIZER_H
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
